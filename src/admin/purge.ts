import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { forgetShared } from "../storage/handles";
import { forgetPartDetails } from "../inspect/part-details";
import { invalidateTotals } from "../log/totals";
import { formatPopInfo, formatPushInfo, formatQueueInfo } from "../format/info";
import { assertName } from "../core/names";
import { resolveAdminOptions, type AdminOptions } from "../options/queue";
import { consumerLockPath, partDir, partOfDir, partPath, popInfoPath, pushInfoPath, queueInfoPath, writerLockPath } from "../storage/paths";
import { neverWritten, partitionName, readPartitions } from "../partitions/declaration";
import { readPartEnd } from "../log/position-check";
import { lockWholeQueue } from "./queue-locks";
import { listParts, readQueueInfo } from "../log/recovery";
import { rewriteRecord } from "../storage/write-whole";

/** What `purgeQueue` removed, and where the queue now starts. */
export interface PurgeResult {
  queue: string;
  /** Messages, bytes and parts removed. */
  messages: number;
  bytes: number;
  parts: number;
  /** The new current part (empty): one past every part the queue had (a partitioned queue: the highest of its partitions'). */
  part: number;
  /** A partitioned queue: how many partitions were purged (one never written has nothing to purge). */
  partitions?: number;
}

const ascii = new TextEncoder();

/**
 * Removes every message of a queue; the queue and its consumers stay, every consumer at the
 * new start. Refused (`E_LOCKED`) while its writer or one of its consumers is open, in this
 * process or another; `E_NOT_FOUND` when there is no such queue.
 *
 * Part ids never go back: the new, empty part is one past the last, so a cursor handed out
 * before the purge can never name a message pushed after it. The steps are ordered so that a
 * crash between any two leaves a queue that opens: the new part is made and named by the
 * queue info line first, the consumers are moved to it, and only then do the old parts go
 * (a consumer still in a removed part resumes at the next one, see `checkSavedPosition`).
 */
export async function purgeQueue(driver: QueueDriver, queue: string, options: AdminOptions = {}): Promise<PurgeResult> {
  assertName(queue, "queue");
  const count = await readPartitions(driver, queue);
  if (count !== undefined) return purgePartitions(driver, queue, count, options);
  const { onProblem, durability } = resolveAdminOptions(driver, options);
  const sync = durability !== "none";
  const held = await lockWholeQueue(driver, queue, "purge");
  try {
    const parts = await listParts(driver, queue);
    const info = await readQueueInfo(driver, queue, onProblem);
    if (!info && parts.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
    let messages = 0;
    let bytes = 0;
    for (const id of parts) {
      // Nobody writes (we hold the writer's lock): the part files say where each part ends.
      const end = await readPartEnd(driver, queue, id, true);
      messages += end.count;
      bytes += end.edge;
    }
    const next = Math.max(info?.part ?? -1, parts.at(-1) ?? -1) + 1;
    // Every write is fenced by the lock it is made under: an admin paused past a lease changes nothing.
    const writerLock = held.locks.get(writerLockPath(queue));
    await startEmptyPart(driver, queue, next, sync, writerLock);
    await rewriteRecord(driver, queueInfoPath(queue), ascii.encode(formatQueueInfo({ queue, part: next })), sync, writerLock);
    for (const consumer of held.consumers) {
      const path = popInfoPath(queue, consumer);
      // A consumer with only a lock file has no position to move.
      if ((await driver.readRecord(path)) === undefined) continue;
      await rewriteRecord(
        driver,
        path,
        ascii.encode(formatPopInfo({ queue, consumer, part: next, position: 0, count: 0 })),
        sync,
        held.locks.get(consumerLockPath(queue, consumer)),
      );
    }
    for (const id of parts) await driver.remove(partDir(queue, id), writerLock);
    forgetShared(driver, (path) => parts.includes(partOfDir(queue, path.split("/")[0]!) ?? -1));
    return { queue, messages, bytes, parts: parts.length, part: next };
  } finally {
    // Parts went (all or some, if cut short): this process's running totals start over.
    invalidateTotals(driver, queue);
    forgetPartDetails(driver, queue);
    await held.release();
  }
}

/**
 * Each partition purged as a queue, in order (`E_LOCKED` while one is open, here or elsewhere:
 * those before it are purged; calling it again purges the rest, the purged ones again, empty).
 */
async function purgePartitions(driver: QueueDriver, queue: string, count: number, options: AdminOptions): Promise<PurgeResult> {
  const result: PurgeResult = { queue, messages: 0, bytes: 0, parts: 0, part: 0, partitions: 0 };
  for (let index = 0; index < count; index++) {
    const purged = await purgeQueue(driver, partitionName(queue, index), options).catch(neverWritten);
    if (!purged) continue;
    result.messages += purged.messages;
    result.bytes += purged.bytes;
    result.parts += purged.parts;
    result.part = Math.max(result.part, purged.part);
    result.partitions! += 1;
  }
  return result;
}

// --- Internal helpers ---

/** A new empty part as the crate writes one: its directory, an empty `Q_queue`, `Q_info_push` `Q;0;0;<crc>`. */
async function startEmptyPart(driver: QueueDriver, queue: string, part: number, sync: boolean, fence: DriverLock | undefined): Promise<void> {
  await driver.mkdir(partDir(queue, part));
  const log = await driver.openLog(partPath(queue, part), { create: true });
  try {
    await log!.truncate(0, fence);
  } finally {
    await log!.close();
  }
  await rewriteRecord(driver, pushInfoPath(queue, part), ascii.encode(formatPushInfo({ queue, edge: 0, count: 0 })), sync, fence);
  if (sync) {
    await driver.syncDir?.(partDir(queue, part));
    await driver.syncDir?.("");
  }
}
