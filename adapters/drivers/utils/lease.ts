import type { DriverLock } from "../../../src/core/driver";
import { VQueueError } from "../../../src/core/errors";
import { StopSignal } from "../../../src/core/stop-signal";

export interface LeaseOptions {
  /** The driver's name and the lock's key, for the lost-lock message. */
  driver: string;
  key: string;
  leaseMs: number;
  /** When the call that took the lock was made: the lease runs from no later than that. */
  since: number;
  /** The fencing token, where the driver has one. */
  epoch?: number;
  /** Renews the lease if the lock is still ours; else says whether it is free (its lease ran out) or another holder's. */
  renew(): Promise<Renewal>;
  /** Frees the lock if it is still ours. */
  free(): Promise<void>;
}

/**
 * What a renewal found: the lock still ours (its lease renewed), free (its lease ran out and
 * nobody took it since), or taken by another holder (`epoch`: the newer holder's, where known).
 */
export type Renewal = "renewed" | Loss;

/** A renewal's answer when the lock is no longer ours. */
export type Loss = "expired" | { takenBy: number | undefined };

/**
 * A lock held by a lease (the unstorage, redis, fs leased and Durable Object drivers): renewed
 * every third of the lease, lost (its signal aborted) once a renewal finds it is no longer ours,
 * and asked again before a write when the last renewal is older than two thirds of the lease.
 * A lease the storage let go while its holder was paused (a Redis key that expired) is lost even
 * when nobody took it: the holder's writes were refused meanwhile and another may have come and
 * gone, so its owner opens again (a new epoch, from the saved state) rather than go on. `lose`
 * lets the driver mark it lost on other evidence (a fenced write refused).
 */
export function leaseLock(options: LeaseOptions): { lock: DriverLock; lose(found?: Loss): void } {
  const { leaseMs } = options;
  let released = false;
  let refreshing: Promise<void> | undefined;
  // Until when nobody else can have it: the lease from the last renewal asked, less a third for clocks and writes in flight.
  let safeUntil = options.since + leaseMs - Math.floor(leaseMs / 3);
  // Not an AbortController: it outlives the request that took the lock (workerd, src/core/stop-signal.ts).
  const lost = new StopSignal();
  // When the last renewal that found the lock ours was asked: how long the holder was away, for the message.
  let renewedAt = options.since;
  const lose = (found: LossFound) => {
    if (lost.aborted) return;
    clearInterval(timer);
    lost.abort(lostError(options, found, Date.now() - renewedAt));
  };
  const refresh = async () => {
    const at = Date.now();
    const found = await options.renew();
    if (released || lost.aborted) return;
    if (found !== "renewed") return lose(found);
    renewedAt = at;
    safeUntil = at + leaseMs - Math.floor(leaseMs / 3);
  };
  /** A renewal asked now, or the one already under way. */
  const refreshNow = () => (refreshing ??= refresh().finally(() => (refreshing = undefined)));
  const timer = setInterval(
    () => {
      refreshing ??= refresh()
        .catch(() => {}) // a failed refresh is retried; the lease covers two misses
        .finally(() => (refreshing = undefined));
    },
    Math.floor(leaseMs / 3),
  );
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
  return { lock, lose: (found) => lose(found ?? "fenced") };
}

/** What the storage holds instead of a lost lock, for messages: nothing (its lease expired), or another holder's. */
export function lockNowHeld(found: Loss): string {
  if (found === "expired") return "expired (nobody holds it now)";
  return `was taken over by ${found.takenBy === undefined ? "another holder" : `another holder (epoch ${found.takenBy})`}`;
}

/** How a loss was found: a renewal's answer (or a refused write's, where the storage says), or a refused write (which of the two, unknown). */
type LossFound = Loss | "fenced";

/** The reason of a lost lease: run out with nobody taking it (the holder opens again), or taken over by another holder. */
function lostError(options: LeaseOptions, found: LossFound, awayMs: number): VQueueError {
  const lock = `[${options.driver}] Lost the lock ${JSON.stringify(options.key)}`;
  const away = `not renewed for ${awayMs} ms (this process was paused or cut off past its lease of ${options.leaseMs} ms)`;
  if (found === "expired")
    return new VQueueError(
      "E_LOCKED",
      `${lock}: it expired, ${away}, and nobody took it since: opened again, it is taken anew (a new epoch) and goes on from the saved state.`,
    );
  if (found === "fenced") return new VQueueError("E_LOCKED", `${lock}: the storage refused its write, ${away}: the lease expired, or another holder took it.`);
  return new VQueueError("E_LOCKED", `${lock}: it ${lockNowHeld(found)}, ${away}.`);
}
