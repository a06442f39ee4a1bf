import type { DriverLock } from "../../../src/core/driver";
import { leaseLock } from "./lease";
import type { InstanceClaim } from "./unstorage-instance";
import { DRIVER_NAME, readForRenewal, toBytes, type UnstorageLike } from "./unstorage-keys";

/** Locks held in this process (exact, before any lease): `${storageKey}\u0000${path}`. */
export const localLocks = new Set<string>();

/**
 * Locks: in-process first (exact), then a lock key holding `owner expiry`, taken with
 * check, set, wait, verify, and refreshed every third of the lease. Without a compare-and-set
 * in unstorage's API two hosts that check within the same few milliseconds can both win:
 * the verify after a pause narrows that window, it does not close it (docs/storage.md#queues-on-unstorage).
 */
export async function acquireLock(
  storage: UnstorageLike,
  key: string,
  local: string,
  leaseMs: number,
  instance?: InstanceClaim,
): Promise<DriverLock | undefined> {
  if (localLocks.has(local)) return undefined;
  localLocks.add(local);
  const owner = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
  const stamp = () => new TextEncoder().encode(`v-queue-lock ${owner} ${Date.now() + leaseMs}\n`);
  // Until when our last stamp holds the lock.
  let stampedUntil = 0;
  try {
    const held = parseLock(await storage.getItemRaw(key));
    if (held && held.expires > Date.now()) {
      localLocks.delete(local);
      return undefined;
    }
    stampedUntil = Date.now() + leaseMs;
    await storage.setItemRaw(key, stamp());
    await new Promise((resolve) => setTimeout(resolve, LOCK_SETTLE_MS));
    if (parseLock(await storage.getItemRaw(key))?.owner !== owner) {
      localLocks.delete(local);
      return undefined;
    }
  } catch (error) {
    localLocks.delete(local);
    throw error;
  }
  const { lock, lose } = leaseLock({
    driver: DRIVER_NAME,
    key,
    leaseMs,
    since: Date.now(),
    renew: async () => {
      const at = Date.now();
      const held = parseLock(await readForRenewal(storage, key, leaseMs / 3));
      // Ours but run out: free for anyone since (no compare-and-set here), so lost all the same.
      if (!held || (held.owner === owner && held.expires <= Date.now())) return "expired";
      if (instance?.superseded) return { takenBy: undefined };
      // Another owner's stamp that had run out before it was written, while ours had not: a late
      // renewal of a holder paused past its lease (written after the pause), not a taking; ours again.
      const lateWrite = held.owner !== owner && held.expires <= at && at < stampedUntil;
      if (held.owner !== owner && !lateWrite) return { takenBy: undefined };
      await storage.setItemRaw(key, stamp());
      stampedUntil = at + leaseMs;
      return "renewed";
    },
    async free() {
      try {
        // Superseded: writes no more (the lock key runs out instead).
        if (!instance?.superseded && parseLock(await storage.getItemRaw(key))?.owner === owner) await storage.removeItem(key);
      } finally {
        unwatch?.();
        localLocks.delete(local);
      }
    },
  });
  // Another instance took the storage over (this one was paused past its registration): lost at once.
  const unwatch = instance?.watch(() => lose({ takenBy: undefined }));
  return lock;
}

const LOCK_SETTLE_MS = 15;

export function parseLock(value: unknown): { owner: string; expires: number } | undefined {
  const bytes = toBytes(value);
  if (!bytes) return undefined;
  const [tag, owner, expires] = new TextDecoder().decode(bytes).trim().split(" ");
  return tag === "v-queue-lock" && owner && Number.isFinite(Number(expires)) ? { owner, expires: Number(expires) } : undefined;
}
