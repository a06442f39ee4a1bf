import type { DriverLock } from "../../../src/driver";
import { VQueueError } from "../../../src/errors";
import { StopSignal } from "../../../src/stop-signal";

export interface LeaseOptions {
  /** The driver's name and the lock's key, for the lost-lock message. */
  driver: string;
  key: string;
  leaseMs: number;
  /** When the call that took the lock was made: the lease runs from no later than that. */
  since: number;
  /** The fencing token, where the driver has one. */
  epoch?: number;
  /** Renews the lease if the lock is still ours; false once another holder has it. */
  renew(): Promise<boolean>;
  /** Frees the lock if it is still ours. */
  free(): Promise<void>;
}

/**
 * A lock held by a lease (the unstorage and redis drivers): renewed every third of the lease,
 * lost (its signal aborted) once a renewal finds another holder, and asked again before a
 * write when the last renewal is older than two thirds of the lease. `lose` lets the driver
 * mark it lost on other evidence (a fenced write refused).
 */
export function leaseLock(options: LeaseOptions): { lock: DriverLock; lose(): void } {
  const { leaseMs } = options;
  let released = false;
  let refreshing: Promise<void> | undefined;
  // Until when nobody else can have it: the lease from the last renewal asked, less a third for clocks and writes in flight.
  let safeUntil = options.since + leaseMs - Math.floor(leaseMs / 3);
  // Not an AbortController: it outlives the request that took the lock (workerd, src/stop-signal.ts).
  const lost = new StopSignal();
  const lose = () => {
    if (lost.aborted) return;
    clearInterval(timer);
    lost.abort(new VQueueError("E_LOCKED", `[${options.driver}] Lost the lock ${JSON.stringify(options.key)}: its lease ran out (the holder was paused or cut off) and another holder took it.`));
  };
  const refresh = async () => {
    const at = Date.now();
    const held = await options.renew();
    if (released || lost.aborted) return;
    if (!held) return lose();
    safeUntil = at + leaseMs - Math.floor(leaseMs / 3);
  };
  /** A renewal asked now, or the one already under way. */
  const refreshNow = () => (refreshing ??= refresh().finally(() => (refreshing = undefined)));
  const timer = setInterval(() => {
    refreshing ??= refresh()
      .catch(() => {}) // a failed refresh is retried; the lease covers two misses
      .finally(() => (refreshing = undefined));
  }, Math.floor(leaseMs / 3));
  (timer as { unref?: () => void }).unref?.();
  const lock: DriverLock = {
    ...(options.epoch === undefined ? {} : { epoch: options.epoch }),
    lost,
    fresh: () => !lost.aborted && !released && Date.now() < safeUntil,
    async assertHeld() {
      if (!lost.aborted && Date.now() < safeUntil) return;
      // Stale (we were paused, or refreshes failed): ask the storage before any write.
      if (!lost.aborted) await refreshNow();
      if (lost.aborted) throw lost.reason;
    },
    async release() {
      if (released) return;
      // Stale (its holder was paused): asked first, so that a lock taken over meanwhile is known
      // lost (its listeners told: counted, say) rather than let go as if it had been held.
      if (!lost.aborted && Date.now() >= safeUntil) await refreshNow().catch(() => {});
      if (released) return; // by a call made meanwhile
      released = true;
      clearInterval(timer);
      await refreshing?.catch(() => {});
      await options.free();
    },
  };
  return { lock, lose };
}
