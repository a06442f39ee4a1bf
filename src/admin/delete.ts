import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { forgetShared } from "../storage/handles";
import { forgetPartDetails } from "../inspect/part-details";
import { invalidateTotals } from "../log/totals";
import { assertName } from "../core/names";
import { resolveAdminOptions, type AdminOptions } from "../options/queue";
import {
  consumerMembersPath,
  consumerOfPopFile,
  consumerOfSharedFile,
  consumerWantPath,
  partDir,
  sharedInboxDir,
  partitionsPath,
  writerLockPath,
  partOfDir,
  popInfoPath,
  prunedPath,
  queueInfoPath,
  delayedPath,
  idempotencyPath,
  schedulesPath,
  sideJournalPath,
  sharedJournalPath,
  sharedOutcomesJournalPath,
  sharedOutcomesPath,
  sharedStatePath,
} from "../storage/paths";
import { lockConsumer, lockWholeQueue } from "./queue-locks";
import { listParts } from "../log/recovery";
import { neverWritten, partitionName, readPartitions } from "../partitions/declaration";

/** What `deleteQueue` removed. */
export interface DeleteQueueResult {
  queue: string;
  /** Parts and consumers (saved positions) removed. */
  parts: number;
  consumers: string[];
}

/**
 * Removes a queue: its parts, its consumers' saved positions, its info file and its lock
 * files (released last), and nothing of any other queue (core/names.ts: a file name belongs to one
 * queue only). Refused (`E_LOCKED`) while its writer or a consumer is open, in this process or
 * another; `E_NOT_FOUND` when nothing of it is left.
 *
 * Crash order: the consumers' positions first, then the parts (oldest first), and the queue
 * info file last. Until that last step the queue is still listed and still opens, so a delete
 * cut short is seen, and calling it again finishes the job. Positions go before parts: a
 * writer that finds the part its info line names gone starts that part afresh, under the same
 * id, and a position left in the old one would skip the new records.
 */
export async function deleteQueue(driver: QueueDriver, queue: string, options: AdminOptions = {}): Promise<DeleteQueueResult> {
  assertName(queue, "queue");
  resolveAdminOptions(driver, options);
  if ((await readPartitions(driver, queue)) !== undefined) return deletePartitioned(driver, queue, options);
  const held = await lockWholeQueue(driver, queue, "delete");
  try {
    const parts = await listParts(driver, queue);
    const info = await driver.readRecord(queueInfoPath(queue));
    const entries = await driver.list("");
    const positions = entries.filter((entry) => consumerOfPopFile(queue, entry) !== undefined);
    // Shared consumers' state (consumers/state/shared-state.ts) goes with their positions.
    const sharedFiles = entries.filter((entry) => consumerOfSharedFile(queue, entry) !== undefined);
    if (info === undefined && parts.length === 0 && positions.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
    // Every removal fenced by the writer's lock: a delete paused past a lease removes nothing of the next writer's.
    const fence = held.locks.get(writerLockPath(queue));
    for (const entry of [...positions, ...sharedFiles]) await driver.remove(entry, fence);
    for (const id of parts) await driver.remove(partDir(queue, id), fence);
    // Retention's record of deleted parts: a queue made later under this name reuses part ids.
    await driver.remove(sideJournalPath(prunedPath(queue)), fence);
    await driver.remove(prunedPath(queue), fence);
    // The writer's side stores: pending delayed messages go with the queue, and its keys.
    // Each journal before its file: a journal left alone would make the file again at the next open.
    const sideFiles = [delayedPath(queue), idempotencyPath(queue), schedulesPath(queue)].flatMap((path) => [sideJournalPath(path), path]);
    for (const path of sideFiles) await driver.remove(path, fence);
    // Hand-over requests (instances/handoff.ts) of its writer and consumers.
    for (const entry of entries) if (entry.startsWith(`${queue}_info_want`)) await driver.remove(entry, fence);
    await driver.remove(queueInfoPath(queue), fence);
    await driver.syncDir?.("");
    // Everything this queue had is gone: a queue of that name created later starts clean.
    forgetShared(
      driver,
      (path) =>
        [queueInfoPath(queue), prunedPath(queue), sideJournalPath(prunedPath(queue)), ...sideFiles].includes(path) ||
        partOfDir(queue, path.split("/")[0]!) !== undefined ||
        consumerOfPopFile(queue, path) !== undefined ||
        consumerOfSharedFile(queue, path) !== undefined,
    );
    return { queue, parts: parts.length, consumers: positions.map((entry) => consumerOfPopFile(queue, entry)!).sort() };
  } finally {
    // Parts went (all or some, if cut short): this process's running totals start over.
    invalidateTotals(driver, queue);
    forgetPartDetails(driver, queue);
    await held.release();
  }
}

/**
 * Removes a consumer: its saved position (`Q_info_pop_C`), a shared consumer's state
 * (`Q_info_shared_C`, `Q_info_shlog_C`), its outcome log (`Q_info_outc_C`) and its lock file. Refused
 * (`E_LOCKED`) while it is open, in this process or another; `E_NOT_FOUND` when it has no
 * saved position.
 */
export async function deleteConsumer(driver: QueueDriver, queue: string, consumer: string, options: AdminOptions = {}): Promise<void> {
  assertName(queue, "queue");
  assertName(consumer, "consumer", queue);
  resolveAdminOptions(driver, options);
  const partitions = await readPartitions(driver, queue);
  if (partitions !== undefined) return deletePartitionedConsumer(driver, queue, consumer, partitions, options);
  const lock = await lockConsumer(driver, queue, consumer, "delete");
  try {
    const path = popInfoPath(queue, consumer);
    if ((await driver.readRecord(path)) === undefined) {
      const queueExists = (await driver.readRecord(queueInfoPath(queue))) !== undefined || (await listParts(driver, queue)).length > 0;
      throw new VQueueError("E_NOT_FOUND", queueExists ? `Consumer "${consumer}" of queue "${queue}" does not exist.` : `Queue "${queue}" does not exist.`);
    }
    // The position first: a delete cut short leaves a shared consumer's state, still shared.
    // Fenced by the consumer's lock, as its commits are.
    await driver.remove(path, lock);
    await driver.remove(sharedJournalPath(queue, consumer), lock);
    await driver.remove(sharedStatePath(queue, consumer), lock);
    await driver.remove(sharedOutcomesJournalPath(queue, consumer), lock);
    await driver.remove(sharedOutcomesPath(queue, consumer), lock);
    await driver.remove(consumerWantPath(queue, consumer), lock);
    await driver.remove(consumerMembersPath(queue, consumer), lock);
    await driver.remove(sharedInboxDir(queue, consumer), lock);
    forgetShared(driver, (p) => p === path);
  } finally {
    // Releasing removes the lock file.
    await lock.release();
  }
}

/**
 * A partitioned queue's consumer: its files in each partition (`E_LOCKED` while an instance
 * holds one of them: those before it are deleted, calling it again finishes). `E_NOT_FOUND`
 * when no partition has it.
 */
async function deletePartitionedConsumer(driver: QueueDriver, queue: string, consumer: string, count: number, options: AdminOptions): Promise<void> {
  let found = 0;
  for (let index = 0; index < count; index++) {
    const partition = partitionName(queue, index);
    const deleted = await deleteConsumer(driver, partition, consumer, options).then(
      () => true,
      (error: unknown) => neverWritten(error) ?? false,
    );
    if (deleted) found++;
    // A partition it never read may still hold its hand-over files (partition 0: who polls it).
    else for (const path of [consumerWantPath(partition, consumer), consumerMembersPath(partition, consumer)]) await driver.remove(path);
  }
  if (found === 0) throw new VQueueError("E_NOT_FOUND", `Consumer "${consumer}" of queue "${queue}" does not exist.`);
}

/**
 * A partitioned queue: each partition as a queue (`E_LOCKED` while one is open), then its
 * declaration, last, under the queue's writer lock: a delete cut short is finished by calling it again.
 */
async function deletePartitioned(driver: QueueDriver, queue: string, options: AdminOptions): Promise<DeleteQueueResult> {
  const count = (await readPartitions(driver, queue))!;
  let parts = 0;
  const consumers = new Set<string>();
  for (let index = 0; index < count; index++) {
    const deleted = await deleteQueue(driver, partitionName(queue, index), options).catch(neverWritten);
    parts += deleted?.parts ?? 0;
    for (const name of deleted?.consumers ?? []) consumers.add(name);
  }
  const lock = await driver.lock(writerLockPath(queue));
  if (!lock) throw new VQueueError("E_LOCKED", `Cannot delete queue "${queue}": its partitions are being declared elsewhere.`);
  try {
    await driver.remove(partitionsPath(queue), lock);
    await driver.syncDir?.("");
  } finally {
    await lock.release();
  }
  return { queue, parts, consumers: [...consumers].sort() };
}
