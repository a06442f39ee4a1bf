import type { DriverLock } from "../../../src/driver";
import { VQueueError } from "../../../src/errors";
import { DRIVER_NAME, toBytes, type UnstorageLike } from "./unstorage-keys";

/** Locks held in this process (exact, before any lease): `${storageKey}\u0000${path}`. */
export const localLocks = new Set<string>();

/**
 * Locks: in-process first (exact), then a lock key holding `owner expiry`, taken with
 * check, set, wait, verify, and refreshed every third of the lease. Without a compare-and-set
 * in unstorage's API two hosts that check within the same few milliseconds can both win:
 * the verify after a pause narrows that window, it does not close it (README).
 */
export async function acquireLock(storage: UnstorageLike, key: string, local: string, leaseMs: number): Promise<DriverLock | undefined> {
  if (localLocks.has(local)) return undefined;
  localLocks.add(local);
  const owner = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
  const stamp = () => new TextEncoder().encode(`v-queue-lock ${owner} ${Date.now() + leaseMs}\n`);
  try {
    const held = parseLock(await storage.getItemRaw(key));
    if (held && held.expires > Date.now()) {
      localLocks.delete(local);
      return undefined;
    }
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
  let released = false;
  let refreshing: Promise<void> | undefined;
  // Until when nobody else can have taken the lock: the expiry of the last stamp we wrote,
  // less a third of the lease for clocks that disagree and writes in flight.
  let safeUntil = Date.now() + leaseMs - Math.floor(leaseMs / 3);
  const lost = new AbortController();
  const lose = () => {
    if (lost.signal.aborted) return;
    clearInterval(timer);
    lost.abort(new VQueueError("E_LOCKED", `[${DRIVER_NAME}] Lost the lock ${JSON.stringify(key)}: its lease ran out (the holder was paused or cut off) and another holder took it.`));
  };
  const refresh = async () => {
    const held = parseLock(await storage.getItemRaw(key));
    if (released || lost.signal.aborted) return;
    if (held?.owner !== owner || held.expires <= Date.now()) return lose();
    const at = Date.now();
    await storage.setItemRaw(key, stamp());
    safeUntil = at + leaseMs - Math.floor(leaseMs / 3);
  };
  const timer = setInterval(() => {
    refreshing ??= refresh()
      .catch(() => {}) // a failed refresh is retried; the lease covers two misses
      .finally(() => (refreshing = undefined));
  }, Math.floor(leaseMs / 3));
  (timer as { unref?: () => void }).unref?.();
  return {
    lost: lost.signal,
    async assertHeld() {
      if (!lost.signal.aborted && Date.now() < safeUntil) return;
      // Stale (we were paused, or refreshes failed): ask the storage before any write.
      if (!lost.signal.aborted) await (refreshing ??= refresh().finally(() => (refreshing = undefined)));
      if (lost.signal.aborted) throw lost.signal.reason;
    },
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      await refreshing?.catch(() => {});
      try {
        if (parseLock(await storage.getItemRaw(key))?.owner === owner) await storage.removeItem(key);
      } finally {
        localLocks.delete(local);
      }
    },
  };
}

const LOCK_SETTLE_MS = 15;

export function parseLock(value: unknown): { owner: string; expires: number } | undefined {
  const bytes = toBytes(value);
  if (!bytes) return undefined;
  const [tag, owner, expires] = new TextDecoder().decode(bytes).trim().split(" ");
  return tag === "v-queue-lock" && owner && Number.isFinite(Number(expires)) ? { owner, expires: Number(expires) } : undefined;
}
