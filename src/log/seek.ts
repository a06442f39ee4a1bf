import { parseCursor, type ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { VQueueError, type QueueProblem } from "../core/errors";
import { withSharedLog } from "../storage/handles";
import { entryHolds, findEntry, readLastIndexEntry, readPartIndex, reportNoIndex, scanToSeq } from "./part-index";
import { partPath } from "../storage/paths";
import { isRecordBoundary, startPosition } from "./position-check";
import { listParts, readQueueInfo } from "./recovery";

/**
 * Where a consumer may be moved: the oldest message, the end (only what comes next), a
 * cursor (the position after a message, from any process), a message by its part and
 * sequence number (the consumer then reads it next), or a time (ms since the epoch, an ISO
 * 8601 string or a Date): the consumer then reads every message written at or after it, and up to
 * `indexInterval` messages before it (records carry no time: the part's index dates one
 * record in `indexInterval`, and the seek lands on the last dated one before the time).
 */
export type SeekTarget = "earliest" | "latest" | (string & {}) | { part: number; seq: number } | { time: number | Date | string };

const ignore = () => {};

/** The position a seek target names, checked against the part files (`E_CURSOR` when it names none). */
export async function resolveSeek(
  driver: QueueDriver,
  queue: string,
  target: SeekTarget,
  onProblem: (problem: QueueProblem) => void = ignore,
): Promise<ConsumerPosition> {
  if (target === "earliest" || target === "latest") {
    const parts = await listParts(driver, queue);
    const info = await readQueueInfo(driver, queue, () => {});
    return startPosition(driver, queue, target as "earliest" | "latest", parts, info?.part);
  }
  if (typeof target === "string") {
    const position = parseCursor(target);
    if (
      !(await withSharedLog(driver, partPath(queue, position.part), (log) => isRecordBoundary(log, { part: position.part, position: 0, count: 0 }, position)))
    ) {
      throw new VQueueError("E_CURSOR", `Cannot seek to ${target}: it names no message end in queue "${queue}".`);
    }
    return position;
  }
  if (target && typeof target === "object" && "time" in target) return seekTime(driver, queue, target.time, onProblem);
  const { part, seq } = (target ?? {}) as { part: number; seq: number };
  if (!Number.isSafeInteger(part) || part < 0 || !Number.isSafeInteger(seq) || seq < 1) {
    throw new VQueueError(
      "E_CURSOR",
      `Cannot seek to ${JSON.stringify(target)}: use "earliest", "latest", a cursor, { part, seq } with part >= 0 and seq >= 1, or { time }.`,
    );
  }
  // One index read, then a scan of at most indexInterval records.
  const entry = await findEntry(driver, queue, part, (e) => e.seq <= seq);
  const found = await withSharedLog(driver, partPath(queue, part), async (log) => {
    if (entry === "none") reportNoIndex(driver, queue, part, onProblem);
    return scanToSeq(log, part, entry === "none" ? undefined : entry, seq);
  });
  if (!found) throw new VQueueError("E_CURSOR", `Cannot seek to message ${seq} of part ${part} of queue "${queue}": there is no such message.`);
  return found;
}

/**
 * The first part whose last write is at or after `time` (the newest part always qualifies),
 * found by a binary search over the parts' indexes, then the entry before `time` in it.
 * A part without an index counts as older than any time (its times are unknown; reported).
 */
async function seekTime(
  driver: QueueDriver,
  queue: string,
  when: number | Date | string,
  onProblem: (problem: QueueProblem) => void,
): Promise<ConsumerPosition> {
  const time = when instanceof Date ? when.getTime() : typeof when === "string" ? Date.parse(when) : when;
  if (!Number.isFinite(time))
    throw new VQueueError("E_CURSOR", `Cannot seek to time ${JSON.stringify(when)}: use ms since the epoch, an ISO 8601 date or a valid Date.`);
  // Everything there was written before a time still to come: only what comes next.
  if (time > Date.now()) return resolveSeek(driver, queue, "latest");
  const info = await readQueueInfo(driver, queue, ignore);
  const ids = await partsOf(driver, queue, info?.part);
  const newest = Math.max(info?.part ?? -1, ids.at(-1) ?? -1);
  if (newest < 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
  // A probe reads only a part's last entry (one small read), the part found its whole index.
  const lastTime = async (part: number) => {
    const last = (await readLastIndexEntry(driver, queue, part)) ?? (await readPartIndex(driver, queue, part))?.at(-1); // a damaged tail: the entries before it
    if (!last) reportNoIndex(driver, queue, part, onProblem);
    return last?.time ?? Number.NEGATIVE_INFINITY;
  };
  let lo = 0;
  let hi = ids.length - 1;
  let at = ids.length; // the first part whose last write is at or after `time`
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const last = ids[mid] === newest ? Number.POSITIVE_INFINITY : await lastTime(ids[mid]!);
    if (last >= time) {
      at = mid;
      hi = mid - 1;
    } else lo = mid + 1;
  }
  const part = ids[at];
  if (part === undefined) return { part: newest, position: 0, count: 0 }; // the newest part is not made yet
  // The last entry dated before the time (none: the part's start).
  const entry = await findEntry(driver, queue, part, (e) => e.time < time);
  if (entry === "none") reportNoIndex(driver, queue, part, onProblem);
  const checked = entry && entry !== "none" && (await withSharedLog(driver, partPath(queue, part), (log) => entryHolds(log, entry)));
  return checked ? { part, position: entry.offset, count: entry.seq - 1 } : { part, position: 0, count: 0 };
}

/** Queues whose parts are remembered (each a few numbers), the least recently listed forgotten first. */
const LISTINGS_KEPT = 1000;
const listings = new Map<string, readonly number[]>();

/**
 * A queue's part ids, ascending, as `listParts` gives them. A listing reads the whole data
 * directory (on fs, a trip through the thread pool, milliseconds at p99 on a busy machine),
 * so a seek by time reuses the last one while it still holds: its last part is still the
 * newest (`newest`, the queue's info line: a writer only adds after it), and its first is
 * still the oldest (retention and prune delete from the oldest). Two size lookups check the
 * second (on fs, two `stat`s on the calling thread); a driver without `sizeOf` always lists.
 */
async function partsOf(driver: QueueDriver, queue: string, newest: number | undefined): Promise<readonly number[]> {
  const key = `${driver.storageKey}\u0000${queue}`;
  const known = listings.get(key);
  if (known && newest !== undefined && known.at(-1) === newest && (await isOldestPart(driver, queue, known[0]!))) return known;
  const ids = await listParts(driver, queue);
  listings.delete(key);
  if (listings.size >= LISTINGS_KEPT) listings.delete(listings.keys().next().value!);
  listings.set(key, ids);
  return ids;
}

/** Whether `part` exists and the one before it does not (false when the driver cannot tell cheaply). */
async function isOldestPart(driver: QueueDriver, queue: string, part: number): Promise<boolean> {
  if (!driver.sizeOf || (await driver.sizeOf(partPath(queue, part))) === undefined) return false;
  return part === 0 || (await driver.sizeOf(partPath(queue, part - 1))) === undefined;
}
