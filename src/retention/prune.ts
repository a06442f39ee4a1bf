import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { listConsumers } from "../inspect/queues";
import { assertName } from "../core/names";
import { readPartIndex, sealedTime } from "../log/part-index";
import { neverWritten, partitionName, readPartitions } from "../partitions/declaration";
import { partDir } from "../storage/paths";
import { readPartEnd } from "../log/position-check";
import { recordPruned, type PrunedPart } from "../log/pruned";
import { listParts, readPushInfo, readQueueInfo } from "../log/recovery";
import { retains, retentionProblems, type RetentionOptions } from "../options/retention";
import { throwProblems } from "../core/check";
import { invalidateTotals, queueTotals } from "../log/totals";

export interface PruneResult {
  queue: string;
  /** The parts deleted, oldest first, with what they held. */
  deleted: PrunedPart[];
  messages: number;
  bytes: number;
  /** Why nothing could be deleted safely, when that is the case. */
  refused?: string;
  /** A partitioned queue: each partition's result (the limits apply to each; `deleted` above is empty, the sums are over them). */
  partitions?: (PruneResult & { partition: number })[];
}

export interface PruneOptions {
  /** Most parts to delete in this call. @default no limit */
  limit?: number;
  /** "Now" for `maxAgeMs` (tests). @default Date.now() */
  now?: number;
  /** The lock of the writer running this (its background retention): the fence of the pruned record's writes (core/driver.ts). */
  fence?: DriverLock;
}

/**
 * Applies `retention` to a queue once, from any process (the writer's runs it in the
 * background, `v-queue prune` and `POST .../prune` on demand). Deletes whole sealed parts,
 * oldest first, while a limit asks for it; never a part at or past the current one (the one
 * `Q_info_queue` names or the newest part directory, whichever is older), and nothing when the queue line is
 * damaged (which part is current is then not known for sure). Each part is recorded in
 * `Q_info_pruned` (log/pruned.ts) before it is deleted, so that consumers are told what they missed.
 */
export async function pruneQueue(driver: QueueDriver, queue: string, retention: RetentionOptions, options: PruneOptions = {}): Promise<PruneResult> {
  assertName(queue, "queue");
  throwProblems(retentionProblems(retention));
  const partitions = await readPartitions(driver, queue);
  if (partitions !== undefined) return prunePartitions(driver, queue, partitions, retention, options);
  const result: PruneResult = { queue, deleted: [], messages: 0, bytes: 0 };
  let damaged = false;
  const info = await readQueueInfo(driver, queue, () => (damaged = true));
  const ids = await listParts(driver, queue);
  if (!info && ids.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
  if (damaged) return { ...result, refused: `the queue line of "${queue}" is damaged: which part is current is not known, so nothing is deleted` };
  // The lesser of the two: a lagging line (a crash between a new part and its line) keeps the
  // parts after it, and a part directory a writer that lost its lock made past the live writer's
  // part (made unfenced, see writer/parts.ts) keeps the part actually being written.
  const current = Math.min(info?.part ?? Number.POSITIVE_INFINITY, ids.at(-1) ?? Number.POSITIVE_INFINITY);
  const sealed = ids.filter((id) => id < current);
  if (!retains(retention) || sealed.length === 0) return result;

  const { maxAgeMs, maxBytes, maxParts, deleteConsumed } = retention;
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const now = options.now ?? Date.now();
  // Sizes of the sealed parts from the running totals (a sealed part never changes: measured
  // once per process from its file), the parts that exist from the fresh listing above; of the
  // current one from its line.
  const known = new Map(((await queueTotals(driver, queue))?.parts() ?? []).map((p) => [p.id, p]));
  const parts: PrunedPart[] = [];
  for (const id of sealed) {
    const cached = known.get(id);
    if (cached) parts.push({ part: id, messages: cached.messages, bytes: cached.bytes });
    else {
      const end = await readPartEnd(driver, queue, id, true);
      parts.push({ part: id, messages: end.count, bytes: end.edge });
    }
  }
  let remainingParts = ids.includes(current) ? ids.length : ids.length + 1;
  let remainingBytes = parts.reduce((sum, p) => sum + p.bytes, 0) + (maxBytes === undefined ? 0 : ((await readPushInfo(driver, queue, current))?.edge ?? 0));
  const consumers = deleteConsumed
    ? await listConsumers(
        driver,
        queue,
        parts.map((p) => ({ id: p.part, bytes: p.bytes, messages: p.messages })),
      )
    : [];

  const doomed: PrunedPart[] = [];
  for (const p of parts) {
    if (doomed.length >= limit) break;
    const due =
      (maxParts !== undefined && remainingParts > maxParts) ||
      (maxBytes !== undefined && remainingBytes > maxBytes) ||
      (consumers.length > 0 && consumers.every((c) => c.part > p.part || (c.part === p.part && c.count >= p.messages))) ||
      (maxAgeMs !== undefined && isOlder(sealedTime(await readPartIndex(driver, queue, p.part), p.bytes), now - maxAgeMs));
    if (!due) break;
    doomed.push(p);
    remainingParts--;
    remainingBytes -= p.bytes;
  }
  if (doomed.length === 0) return result;
  await recordPruned(driver, queue, doomed, options.fence);
  for (const p of doomed) {
    // The directory and the files in it (unstorage: the chunk keys too). Readers that have the
    // part open keep reading it where the storage allows (POSIX files, memory).
    await driver.remove(partDir(queue, p.part), options.fence);
    result.deleted.push(p);
    result.messages += p.messages;
    result.bytes += p.bytes;
  }
  invalidateTotals(driver, queue, "listing");
  // No directory fsync: a deletion lost in a power cut only keeps a part longer (it is in
  // Q_info_pruned already, and goes at the next round), and an fsync here would compete with
  // the pushes' own.
  return result;
}

/** Each partition pruned as a queue (one never written has nothing to prune). */
async function prunePartitions(driver: QueueDriver, queue: string, count: number, retention: RetentionOptions, options: PruneOptions): Promise<PruneResult> {
  const result: PruneResult = { queue, deleted: [], messages: 0, bytes: 0, partitions: [] };
  for (let partition = 0; partition < count; partition++) {
    const pruned = await pruneQueue(driver, partitionName(queue, partition), retention, options).catch(neverWritten);
    if (!pruned) continue;
    result.partitions!.push({ ...pruned, partition });
    result.messages += pruned.messages;
    result.bytes += pruned.bytes;
  }
  return result;
}

/** A part whose newest message's time is unknown (no index, or not sealed by v-queue) is never too old. */
function isOlder(time: number | undefined, cutoff: number): boolean {
  return time !== undefined && time < cutoff;
}
