import type { DriverLock, QueueDriver } from "../core/driver";

/** Replaces a small file's content in place (info lines: never renamed over, docs/format.md#info-lines), creating it if missing. */
export async function rewriteRecord(driver: QueueDriver, path: string, data: Uint8Array, sync: boolean, fence?: DriverLock): Promise<void> {
  const file = (await driver.openRecord(path, { create: true }))!;
  try {
    await file.replace(data, fence);
    if (sync) await file.sync();
  } finally {
    await file.close();
  }
}

/**
 * The whole file at once: atomically where the driver can (all bundled drivers can), else
 * replaced in place. `fence`: the lock of the holder writing it (core/driver.ts, `DriverLock.epoch`).
 */
export async function writeWhole(driver: QueueDriver, path: string, data: Uint8Array, sync: boolean, fence?: DriverLock): Promise<void> {
  if (driver.writeAtomic) return driver.writeAtomic(path, data, { sync, fence });
  return rewriteRecord(driver, path, data, sync, fence);
}
