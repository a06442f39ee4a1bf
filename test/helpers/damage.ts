import type { QueueDriver } from "../../src/core/driver";

/**
 * Faults a test injects through a driver's own interface: a log only appends, so bytes inside
 * it are changed by reading it whole, cutting it to nothing and appending it again, changed.
 */
export async function patchLog(driver: QueueDriver, path: string, patches: [offset: number, bytes: Uint8Array][]): Promise<void> {
  const log = (await driver.openLog(path, { create: false }))!;
  try {
    const bytes = Uint8Array.from(await log.read(0, await log.size()));
    for (const [offset, patch] of patches) bytes.set(patch, offset);
    await log.truncate(0);
    await log.append(0, bytes);
  } finally {
    await log.close();
  }
}

/** Appends raw bytes to a log (a record past the info line, a torn write). */
export async function appendToLog(driver: QueueDriver, path: string, bytes: Uint8Array): Promise<number> {
  const log = (await driver.openLog(path, { create: true }))!;
  try {
    const at = await log.size();
    await log.append(at, bytes);
    return at;
  } finally {
    await log.close();
  }
}

/** Rewrites an info record (a line another process lost, or damaged). */
export async function replaceRecord(driver: QueueDriver, path: string, bytes: Uint8Array): Promise<void> {
  const record = (await driver.openRecord(path, { create: true }))!;
  try {
    await record.replace(bytes);
  } finally {
    await record.close();
  }
}

/** A log's size now. */
export async function logSize(driver: QueueDriver, path: string): Promise<number> {
  const log = (await driver.openLog(path, { create: false }))!;
  try {
    return await log.size();
  } finally {
    await log.close();
  }
}
