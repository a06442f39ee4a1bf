import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";

/**
 * Takes the lock at `path` (or throws `E_LOCKED` with `busy`), then runs `open` with it.
 * If `open` fails, `cleanup` runs and the lock is released before the error goes on: a
 * failed open leaves nothing held.
 */
export async function openLocked<T>(
  driver: QueueDriver,
  path: string,
  busy: string,
  open: (lock: DriverLock) => T,
  init: (opened: T) => Promise<void>,
  cleanup: (opened: T) => Promise<void>,
): Promise<T> {
  const lock = await driver.lock(path);
  if (!lock) throw new VQueueError("E_LOCKED", busy);
  const opened = open(lock);
  try {
    await init(opened);
  } catch (error) {
    await cleanup(opened).catch(() => {});
    await lock.release().catch(() => {});
    throw error;
  }
  return opened;
}
