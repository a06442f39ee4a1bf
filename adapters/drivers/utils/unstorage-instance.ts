import { VQueueError } from "../../../src/core/errors";
import { sleep } from "../../../src/core/sleep";
import { DRIVER_NAME, readForRenewal, toBytes, type UnstorageLike } from "./unstorage-keys";

/**
 * One instance per storage. unstorage cannot check a lock's owner in the same step as a write,
 * so a process paused past its lease (SIGSTOP, a suspended VM) that wakes after another took
 * its locks over can land writes where nobody reads any more: acknowledged, then never
 * consumed. So the driver registers its process under an instance key (`owner expiry pid`,
 * refreshed every third of the lease, like a lock) before its first write, and a second live
 * process on the same storage and base is refused (`E_UNFENCED`). Every driver of one process
 * is the same instance. A registration whose process died runs out after a lease: a restart
 * waits for that, never longer. A process that finds its registration taken over (it was
 * paused past it) loses its locks and writes nothing while the other one's registration lives.
 */

/** This process's name in registrations: all of its drivers on one storage are one instance. */
const PROCESS_OWNER = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;

/** The key under the driver's base (`~`: never an engine name, so listings skip it). */
export const INSTANCE_KEY = "~instance";

export interface InstanceClaim {
  /** Registers this process (once; waits up to a lease for a stale registration to run out), or rejects with `E_UNFENCED`. */
  ready(): Promise<void>;
  /**
   * Before a write: registered, and still ours. Cheap while the last renewal is fresh; after a
   * pause, asks the storage first, so that a process that was superseded meanwhile finds out
   * before it writes. Rejects with `E_UNFENCED` when another instance has it.
   */
  assertOurs(): Promise<void>;
  /** Set once another instance took the registration over: every later write is refused with it. */
  readonly superseded: VQueueError | undefined;
  /** Calls `onLoss` when the registration is taken over; returns the unsubscribe. */
  watch(onLoss: () => void): () => void;
  /** Drops this driver's use; the last one in the process removes the registration. */
  release(): Promise<void>;
}

interface Registration extends Omit<InstanceClaim, "release"> {
  users: number;
  stop(): Promise<void>;
}

/** Per storage (the driver's `storageKey`): one registration, shared by the drivers of this process. */
const registrations = new Map<string, Registration>();

/** The registration of this process on `key` of `storage`, shared by its drivers with one `storageKey`. */
export function claimInstance(storage: UnstorageLike, key: string, storageKey: string, leaseMs: number, owner = PROCESS_OWNER): InstanceClaim {
  let registration = registrations.get(storageKey);
  if (!registration) registrations.set(storageKey, (registration = register(storage, key, leaseMs, owner, () => registrations.delete(storageKey))));
  registration.users++;
  const shared = registration;
  let released = false;
  return {
    ready: () => shared.ready(),
    assertOurs: () => shared.assertOurs(),
    get superseded() {
      return shared.superseded;
    },
    watch: (onLoss) => shared.watch(onLoss),
    async release() {
      if (released) return;
      released = true;
      if (--shared.users === 0) await shared.stop();
    },
  };
}

function register(storage: UnstorageLike, key: string, leaseMs: number, owner: string, forget: () => void): Registration {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid;
  const stamp = () => new TextEncoder().encode(`v-queue-instance ${owner} ${Date.now() + leaseMs} ${pid ?? "-"}\n`);
  const listeners = new Set<() => void>();
  let claiming: Promise<void> | undefined;
  let superseded: VQueueError | undefined;
  let stopped = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let refreshing: Promise<void> | undefined;
  // Until when nobody else can have registered: the lease from the last renewal, less a third (as a lock's, lease.ts).
  let safeUntil = 0;
  // When the last stamp was made, on the monotonic clock (a pause moves it, a wall-clock step does
  // not): once a lease has gone by since, the registration ran out.
  let lastRenewal = 0;
  // Whether `superseded` says this one's own registration ran out (claimed anew at once) rather than another's taking.
  let ranOut = false;
  // Only the first claim waits for a registration to run out (a restart after a kill); a later one, refused, says so at once.
  let mayWait = true;
  /** Writes a new stamp; `at`: when the look that found the registration free or ours began. */
  const renew = async (at: number) => {
    const stampedAt = performance.now();
    await storage.setItemRaw(key, stamp());
    lastRenewal = stampedAt;
    safeUntil = at + leaseMs - Math.floor(leaseMs / 3);
  };

  const claim = async () => {
    let waited = !mayWait;
    // Claimed again after this one's registration ran out: a run-out stamp found now may be a late
    // write of this one landing over a live instance's, which that one restores within a renewal.
    let lookedTwice = mayWait;
    mayWait = false;
    for (;;) {
      const at = Date.now();
      const held = parseInstance(await storage.getItemRaw(key));
      if (held && held.owner !== owner && held.expires > Date.now()) {
        // Live, or left by a process that died: a dead one's runs out within its lease, so wait once.
        if (waited) throw unfencedError(key, held, leaseMs);
        await sleep(Math.min(held.expires - Date.now(), leaseMs) + SETTLE_MS);
        waited = true;
        continue;
      }
      if (held && !lookedTwice) {
        lookedTwice = true;
        await sleep(Math.floor(leaseMs / 3) + SETTLE_MS);
        continue;
      }
      await renew(at);
      await sleep(SETTLE_MS);
      const now = parseInstance(await storage.getItemRaw(key));
      if (now?.owner === owner) break;
      if (now) throw unfencedError(key, now, leaseMs);
    }
    timer = setInterval(() => void refreshNow().catch(() => {}), Math.floor(leaseMs / 3)); // a failed refresh is retried
    (timer as { unref?: () => void }).unref?.();
  };

  const heartbeat = async (): Promise<void> => {
    const at = Date.now();
    const since = performance.now();
    const held = parseInstance(await readForRenewal(storage, key, leaseMs / 3));
    if (stopped || superseded) return;
    const away = since - lastRenewal;
    // Empty, or ours within its lease: nobody else registered meanwhile, so renewed. A stamp of
    // another owner that had run out before it was written is a late write of an instance paused
    // past its lease (its renewal, written after the pause): ours is taken back.
    if (!held || (away < leaseMs && (held.owner === owner || held.expires <= at))) return renew(at);
    // Ours but run out: another may have registered meanwhile, and a late renewal of ours written
    // over it; claimed anew (`claimAgain`), as after being taken over.
    ranOut = held.owner === owner;
    superseded = ranOut
      ? new VQueueError(
          "E_UNFENCED",
          `[${DRIVER_NAME}] This v-queue instance's registration on the storage (${JSON.stringify(key)}) ran out (not renewed for ${Math.round(away)} ms, past its lease of ${leaseMs} ms: this process was paused or cut off): its locks are lost, and it registers again before it writes.`,
        )
      : new VQueueError(
          "E_UNFENCED",
          `[${DRIVER_NAME}] Another v-queue instance (${describe(held)}) took the storage over (${JSON.stringify(key)}) while this one was paused or cut off past its lease of ${leaseMs} ms: its locks are lost, and it writes nothing while that one runs (the ${DRIVER_NAME} driver cannot fence a late write, so one instance runs per storage). Once that one stops, this one registers again.`,
        );
    clearInterval(timer);
    for (const onLoss of listeners) onLoss();
  };

  /** A renewal now, or the one under way. */
  const refreshNow = () => (refreshing ??= heartbeat().finally(() => (refreshing = undefined)));

  /** Superseded: refused while the other instance's registration lives; once it ran out (that one stopped), registered anew. */
  const claimAgain = async () => {
    const held = parseInstance(await storage.getItemRaw(key));
    if (held && held.owner !== owner && held.expires > Date.now()) throw superseded;
    superseded = undefined;
    ranOut = false;
    claiming = undefined;
  };

  const ready = () => {
    if (superseded) return Promise.reject(superseded);
    // A refused claim is asked again next time (the other instance may have stopped since).
    return (claiming ??= claim().catch((error: unknown) => {
      claiming = undefined;
      throw error;
    }));
  };

  return {
    users: 0,
    ready,
    async assertOurs() {
      if (superseded) await claimAgain();
      await ready();
      if (!superseded && Date.now() >= safeUntil) await refreshNow();
      // Found run out just now (this process was paused): registered anew before the write, or refused.
      if (superseded && ranOut) {
        await claimAgain();
        await ready();
      }
      if (superseded) throw superseded;
    },
    get superseded() {
      return superseded;
    },
    watch(onLoss) {
      listeners.add(onLoss);
      return () => listeners.delete(onLoss);
    },
    async stop() {
      stopped = true;
      forget();
      clearInterval(timer);
      await claiming?.catch(() => {});
      if (!claiming || superseded) return;
      if (parseInstance(await storage.getItemRaw(key))?.owner === owner) await storage.removeItem(key);
    },
  };
}

const SETTLE_MS = 15;

interface Held {
  owner: string;
  expires: number;
  pid: string;
}

function parseInstance(value: unknown): Held | undefined {
  const bytes = toBytes(value);
  if (!bytes) return undefined;
  const [tag, owner, expires, pid = "-"] = new TextDecoder().decode(bytes).trim().split(" ");
  return tag === "v-queue-instance" && owner && Number.isFinite(Number(expires)) ? { owner, expires: Number(expires), pid } : undefined;
}

function describe(held: Held): string {
  return held.pid === "-" ? `registered as ${held.owner}` : `pid ${held.pid}, registered as ${held.owner}`;
}

function unfencedError(key: string, held: Held, leaseMs: number): VQueueError {
  return new VQueueError(
    "E_UNFENCED",
    `[${DRIVER_NAME}] Another v-queue instance (${describe(held)}) uses this storage (${JSON.stringify(key)} is renewed within its lease of ${leaseMs} ms). The ${DRIVER_NAME} driver cannot fence a paused instance's late writes (no compare-and-set with a write), so it runs one instance per storage and base. For several instances use a driver that fences: redis+vq:// (v-queue's redis driver) or the fs driver with leased locks (fs:<dir>?lease=5000). To run several anyway, accepting that a paused instance's late writes can be lost, give every instance \`instances: "many"\` (a spec's ?instances=many).`,
  );
}
