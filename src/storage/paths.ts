import { isValidConsumerName, isValidQueueName } from "../core/names";

const QUEUE_INFO_SUFFIX = "_info_queue";

/** Where each file of a queue lives, relative to the driver's base directory (docs/format.md#files-of-a-queue). */
export const queueInfoPath = (q: string): string => `${q}${QUEUE_INFO_SUFFIX}`;
export const partDir = (q: string, part: number): string => `${q}-${part}`;
export const partPath = (q: string, part: number): string => `${q}-${part}/${q}_queue`;
export const pushInfoPath = (q: string, part: number): string => `${q}-${part}/${q}_info_push`;
/** v-queue's own sparse index of a part (log/part-index.ts); the crate ignores files it does not know in a part directory. */
export const partIndexPath = (q: string, part: number): string => `${q}-${part}/${q}_index`;
/** v-queue's message attributes of a part (format/attributes.ts): beside its records, deleted with the part. */
export const attributesPath = (q: string, part: number): string => `${q}-${part}/${q}_attrs`;
/** v-queue's record of the parts retention deleted (log/pruned.ts): no queue name holds `_info_`, and `pruned` is no `pop_`. */
export const prunedPath = (q: string): string => `${q}_info_pruned`;
/**
 * v-queue's delayed messages of a queue (writer/delayed.ts) and its idempotency keys (writer/idempotency.ts),
 * both kept by the queue's writer. As `pruned`: after the queue's `_info_`, `delayed` and
 * `idem` are no `pop_`, `queue`, `pruned`, `shared_` or `shlog_`, so no queue or consumer name
 * spells them (core/names.ts), and the crate, which opens only the files it names, never sees them.
 */
export const delayedPath = (q: string): string => `${q}_info_delayed`;
export const idempotencyPath = (q: string): string => `${q}_info_idem`;
/** v-queue's schedules of a queue (writer/schedules.ts), kept by its writer: as `delayed`, `sched` is no `pop_`, `queue`, `pruned`, `shared_` or `shlog_`. */
export const schedulesPath = (q: string): string => `${q}_info_sched`;
/** The copy a side file's compaction writes first (storage/side-log.ts, log/pruned.ts): `Q_info_delayed_new`, `Q_info_idem_new`, `Q_info_sched_new`, `Q_info_pruned_new`. */
export const sideJournalPath = (path: string): string => `${path}_new`;
/** v-queue's declaration of a partitioned queue (partitions/declaration.ts): like `delayed`, no `pop_`, `queue` or `shared_`. */
export const partitionsPath = (q: string): string => `${q}_info_partitions`;
/** The queue name of a `Q_info_partitions` file name, if it is one of a valid queue. */
export const queueOfPartitionsFile = (fileName: string): string | undefined => queueOfFile(fileName, "_info_partitions");
/** The queue name of a `Q_info_sched` file name, if it is one of a valid queue. */
export const queueOfSchedulesFile = (fileName: string): string | undefined => queueOfFile(fileName, "_info_sched");

/** The queue name of a queue's file name ending in `suffix`, if it is one of a valid queue. */
function queueOfFile(fileName: string, suffix: string): string | undefined {
  if (!fileName.endsWith(suffix)) return undefined;
  const name = fileName.slice(0, -suffix.length);
  return isValidQueueName(name) ? name : undefined;
}
/**
 * Hand-over requests (instances/handoff.ts): an instance that wants a lock another one holds writes a small
 * marker, which the holder reads. `wantw` (the queue's writer lock) and `wantc_` (a consumer's
 * lock), after the queue's `_info_`, are no `pop_`, `queue`, `shared_`, `shlog_` or `pruned`, so
 * no queue or consumer name spells them and listings pass them by; `wantc_` is shorter than
 * `pop_` plus `.lock`, so the pair's name length rule covers it.
 */
export const writerWantPath = (q: string): string => `${q}_info_wantw`;
export const consumerWantPath = (q: string, c: string): string => `${q}_info_wantc_${c}`;
/**
 * Who polls consumer `c` of a partitioned queue (instances/members.ts), kept beside partition 0's files
 * (`q` is that partition's name): `wantm_` is as long as `wantc_`, and a queue's delete removes
 * it with the want markers.
 */
export const consumerMembersPath = (q: string, c: string): string => `${q}_info_wantm_${c}`;
/** Which instances produce batches without a key to a partitioned queue (instances/members.ts), beside partition 0's files: `wantn` is as long as `wantw`. */
export const writerMembersPath = (q: string): string => `${q}_info_wantn`;
/**
 * A shared consumer's ack inbox (consumers/state/ack-inbox.ts): a directory of acks other instances took for it.
 * `wanta_` is as long as `wantc_`, and a queue's delete removes it with the want markers.
 */
export const sharedInboxDir = (q: string, c: string): string => `${q}_info_wanta_${c}`;
export const popInfoPath = (q: string, c: string): string => `${q}_info_pop_${c}`;
/**
 * A shared consumer's state beside its `Q_info_pop_C` (consumers/state/shared-state.ts): a snapshot, which also
 * marks the name as shared, and a journal of what happened since. After the queue's `_info_`,
 * `shared_` and `shlog_` are no `pop_`, `queue` or `pruned`, and neither prefixes the other; both
 * are shorter than `pop_` plus `.lock`, so the pair's name length rule covers them.
 */
export const sharedStatePath = (q: string, c: string): string => `${q}_info_shared_${c}`;
export const sharedJournalPath = (q: string, c: string): string => `${q}_info_shlog_${c}`;
/**
 * A shared consumer's outcome log (format/outcome.ts) and its compaction's copy (storage/side-log.ts):
 * `outc_` and `outn_` are no `pop_`, `queue`, `pruned`, `shared_`, `shlog_` or `want`, none prefixes
 * another, and both are shorter than `pop_` plus `.lock`. The copy has a prefix of its own: `outc_C_new`
 * would be consumer `C_new`'s log.
 */
export const sharedOutcomesPath = (q: string, c: string): string => `${q}_info_outc_${c}`;
export const sharedOutcomesJournalPath = (q: string, c: string): string => `${q}_info_outn_${c}`;
export const writerLockPath = (q: string): string => `${q}_queue.lock`;
export const consumerLockPath = (q: string, c: string): string => `${q}_info_pop_${c}.lock`;

/** The consumer name of a `Q_info_pop_C` file name, if it is one of queue `q` (see core/names.ts). */
export function consumerOfPopFile(q: string, fileName: string): string | undefined {
  const prefix = `${q}_info_pop_`;
  if (!fileName.startsWith(prefix)) return undefined;
  const name = fileName.slice(prefix.length);
  return isValidConsumerName(name, q) ? name : undefined;
}

/** The consumer name of a shared consumer's `Q_info_shared_C`, `Q_info_shlog_C`, `Q_info_outc_C` or `Q_info_outn_C` file name, if it is one of queue `q`. */
export function consumerOfSharedFile(q: string, fileName: string): string | undefined {
  for (const prefix of [`${q}_info_shared_`, `${q}_info_shlog_`, `${q}_info_outc_`, `${q}_info_outn_`]) {
    if (fileName.startsWith(prefix)) {
      const name = fileName.slice(prefix.length);
      return isValidConsumerName(name, q) ? name : undefined;
    }
  }
  return undefined;
}

/** The consumer name of a `Q_info_pop_C.lock` file name, if it is one of queue `q` (a consumer name never ends in `.lock`). */
export function consumerOfLockFile(q: string, fileName: string): string | undefined {
  return fileName.endsWith(".lock") ? consumerOfPopFile(q, fileName.slice(0, -".lock".length)) : undefined;
}

/** The queue name of a `Q_info_queue` file name, if it is one of a valid queue. */
export function queueOfInfoFile(fileName: string): string | undefined {
  return queueOfFile(fileName, QUEUE_INFO_SUFFIX);
}

/** The part id of a `Q-<id>` directory name, if it is one of queue `q`. */
export function partOfDir(q: string, dirName: string): number | undefined {
  const prefix = `${q}-`;
  if (!dirName.startsWith(prefix)) return undefined;
  const id = dirName.slice(prefix.length);
  return /^\d{1,15}$/.test(id) ? Number(id) : undefined;
}
