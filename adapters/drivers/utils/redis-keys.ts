/**
 * How the redis driver names its keys. Every key of one queue shares one hash tag,
 * `{<prefix>:<queue>}`, so that one Lua script can touch a file, its queue's file set and a
 * lock in one slot of a cluster (a partition is an ordinary queue, `<q>.p<k>`, with its own tag).
 *
 * - `{P:Q}:f:<path>`  a file's bytes (a part log, an info line, a side log), one string
 * - `{P:Q}:files`     the queue's file and directory names (`dir/` for a directory) and held locks
 * - `{P:Q}:l:<path>`  a lock: `<owner> <epoch>`, with a PX lease
 * - `{P:Q}:epoch`     the fencing counter of the queue's locks (INCR; never removed)
 * - `{P:Q}:changed`   the pub/sub channel told of each write (watch)
 * - `{P}:queues`      the registry: every queue with files, so `list("")` never SCANs
 */

export const DRIVER_NAME = "redis";

/**
 * The queue a driver path belongs to (paths.ts, names.ts make this one-to-one): the first
 * segment's name up to its first `_info_` (info, position, side files), or without `_queue.lock`
 * (the writer's lock), or without `-<part>` (a part directory). "" for a path of no queue.
 */
export function queueOfPath(path: string): string {
  const first = path.split("/")[0]!;
  const info = first.indexOf("_info_");
  if (info > 0) return first.slice(0, info);
  if (first.endsWith("_queue.lock")) return first.slice(0, -"_queue.lock".length);
  const part = /^(.+)-\d{1,15}$/.exec(first);
  return part ? part[1]! : "";
}

export interface QueueKeys {
  queue: string;
  files: string;
  epoch: string;
  channel: string;
  file(path: string): string;
  lock(path: string): string;
}

/** The keys of `queue` under `prefix`. */
export function queueKeys(prefix: string, queue: string): QueueKeys {
  const tag = `{${prefix}:${queue}}`;
  return {
    queue,
    files: `${tag}:files`,
    epoch: `${tag}:epoch`,
    channel: `${tag}:changed`,
    file: (path) => `${tag}:f:${path}`,
    lock: (path) => `${tag}:l:${path}`,
  };
}

/** The registry of queues under `prefix`. */
export const registryKey = (prefix: string): string => `{${prefix}}:queues`;

/** Redis strings hold at most 512 MiB. */
export const MAX_STRING_BYTES = 512 * 1024 * 1024;

/** A Uint8Array as the Buffer ioredis sends, without a copy. */
export function toBuffer(data: Uint8Array): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** A Buffer from ioredis as a plain Uint8Array view (callers compare and keep Uint8Arrays). */
export function toBytes(data: Buffer): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}
