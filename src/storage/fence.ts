import type { DriverLock, LogFile, QueueDriver, RecordFile } from "../core/driver";
import { VQueueError } from "../core/errors";

/**
 * A holder's view of a log or a record: every write carries the holder's lock as its `fence`
 * (core/driver.ts, `DriverLock.epoch`), so that a driver with leases refuses it once another holder
 * took over. Wrapped once where the holder opens the file, instead of at each write.
 */
export function fencedLog(log: LogFile, lock: DriverLock): LogFile {
  return {
    size: () => log.size(),
    read: (position, length) => log.read(position, length),
    append: (at, data) => log.append(at, data, lock),
    truncate: (length) => log.truncate(length, lock),
    sync: () => log.sync(),
    close: () => log.close(),
  };
}

/** A log of the queue's, made if missing, its writes fenced by `fence` (none: unfenced). */
export async function openFencedLog(driver: QueueDriver, path: string, fence: DriverLock | undefined): Promise<LogFile> {
  const log = (await driver.openLog(path, { create: true }))!;
  return fence ? fencedLog(log, fence) : log;
}

/** `fencedLog` for a record. */
export function fencedRecord(record: RecordFile, lock: DriverLock): RecordFile {
  return {
    read: () => record.read(),
    replace: (data) => record.replace(data, lock),
    sync: () => record.sync(),
    close: () => record.close(),
  };
}

/** Calls `listener` once when `lock` is found lost, at once when it is already; never for a lock that cannot be lost. */
export function onLockLost(lock: DriverLock, listener: () => void): void {
  const { lost } = lock;
  if (!lost) return;
  if (lost.aborted) listener();
  else lost.addEventListener("abort", listener, { once: true });
}

/**
 * Whether `lock` is still held: asks the storage when its lease is stale (its holder was paused;
 * see `DriverLock.assertHeld`), false once it is lost. Any other failure (the storage out of
 * reach) is thrown: the lock may well be held.
 */
export async function isLockHeld(lock: DriverLock): Promise<boolean> {
  try {
    await lock.assertHeld?.();
  } catch (error) {
    if (!lock.lost?.aborted) throw error;
  }
  return !lock.lost?.aborted;
}

/** Whether `error` says the holder's lock is lost: its own check found another holder (`E_LOCKED`), or the storage refused its write (`E_FENCED`). */
export function isLockLost(error: unknown): boolean {
  return VQueueError.isError(error) && (error.code === "E_LOCKED" || error.code === "E_FENCED");
}

/** Whether `error` is a driver's refusal of a stale holder's write: the lock is lost, whatever the lock's own signal says yet. */
export function isFenced(error: unknown): boolean {
  return VQueueError.isError(error) && error.code === "E_FENCED";
}
