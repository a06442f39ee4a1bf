// Over 300 lines: the index file's format, its writer and its reader together, so that what is
// written and what is read cannot drift apart.
/**
 * A part's sparse index, `B/Q-<id>/Q_index`: a v-queue file beside the crate's (the crate
 * ignores files it does not know in a part directory). It tells where record `seq` starts and
 * when it was written, for the first record of the part, then every `indexInterval` records,
 * and for the part's end when the part is sealed (rolled or closed). So a seek by sequence is
 * one index read and a scan of at most `indexInterval` records, a seek by time lands within
 * `indexInterval` records, and a part's age is known without reading it.
 *
 * The index is a hint, the part file is the truth: it is written after the data it describes,
 * never fsync'd on its own, and a missing or damaged one (crate-written parts, a crash) makes
 * readers scan instead.
 *
 * Format: append-only, fixed-size entries of 24 bytes, little-endian:
 *   0..8   u64  byte offset of record `seq` in the part (for the end entry: the part's size)
 *   8..12  u32  seq: the record's sequence number (for the end entry: records in the part + 1)
 *   12..20 u64  time in ms since the epoch when the record was written (the end entry: the last write)
 *   20..24 u32  CRC-32 of bytes 0..20
 * Entries ascend in seq and offset. Reading stops at the first entry that fails its crc or
 * does not ascend: a torn tail is ignored (and cut off by the next writer of the part).
 */
import { crc32Range } from "../format/crc32";
import type { DriverLock, LogFile, QueueDriver } from "../core/driver";
import { fencedLog } from "../storage/fence";
import type { QueueProblem } from "../core/errors";
import { withSharedLog } from "../storage/handles";
import { partIndexPath } from "../storage/paths";
import { HEADER_SIZE, readHeader } from "../format/record";
import { readHeaderAt, scanPart } from "./scan";

export const INDEX_ENTRY_SIZE = 24;

export interface IndexEntry {
  /** Sequence number of the record at `offset` (the part's count + 1 for its end). */
  seq: number;
  /** Byte offset of that record in the part. */
  offset: number;
  /** When it was written, ms since the epoch (never less than an earlier entry's: a clock set back only keeps data longer). */
  time: number;
}

// Two u32 halves, not BigInt: a seek parses thousands of entries, and BigInt costs several times more.
const setUint64 = (view: DataView, at: number, value: number): void => {
  view.setUint32(at, value % 0x1_0000_0000, true);
  view.setUint32(at + 4, Math.floor(value / 0x1_0000_0000), true);
};
const getUint64 = (view: DataView, at: number): number => view.getUint32(at, true) + view.getUint32(at + 4, true) * 0x1_0000_0000;

/** The entries as the file's bytes. */
export function encodeEntries(entries: readonly IndexEntry[]): Uint8Array {
  const buf = new Uint8Array(entries.length * INDEX_ENTRY_SIZE);
  const view = new DataView(buf.buffer);
  entries.forEach((e, i) => {
    const at = i * INDEX_ENTRY_SIZE;
    setUint64(view, at, e.offset);
    view.setUint32(at + 8, e.seq, true);
    setUint64(view, at + 12, Math.max(0, Math.floor(e.time)));
    view.setUint32(at + 20, crc32Range(buf, at, at + 20), true);
  });
  return buf;
}

/** The valid entries of an index file's bytes, and whether anything after them was not (a torn or damaged tail). */
export function parseIndex(bytes: Uint8Array): { entries: IndexEntry[]; damaged: boolean } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const entries: IndexEntry[] = [];
  let at = 0;
  for (; at + INDEX_ENTRY_SIZE <= bytes.length; at += INDEX_ENTRY_SIZE) {
    if (view.getUint32(at + 20, true) !== crc32Range(bytes, at, at + 20)) break;
    const offset = getUint64(view, at);
    const seq = view.getUint32(at + 8, true);
    const prev = entries.at(-1);
    if (seq < 1 || (prev ? seq <= prev.seq || offset <= prev.offset : offset !== 0 && seq === 1)) break;
    const time = Math.max(getUint64(view, at + 12), prev?.time ?? 0);
    entries.push({ seq, offset, time });
  }
  return { entries, damaged: at < bytes.length };
}

/**
 * The index of a part: its entries, or undefined when it is missing, empty or its first entry
 * is damaged (read the part instead). Read through the log interface (unstorage keeps an
 * appended file as chunks).
 */
export async function readPartIndex(driver: QueueDriver, queue: string, part: number): Promise<IndexEntry[] | undefined> {
  const entries = await withSharedLog(driver, partIndexPath(queue, part), async (log) => parseIndex(await log.read(0, await log.size())).entries);
  return entries && entries.length > 0 ? entries : undefined;
}

/**
 * The last entry of a part's index from one small read (a binary search over the parts needs
 * no more); undefined when the index is missing or its last whole entry is damaged.
 */
export async function readLastIndexEntry(driver: QueueDriver, queue: string, part: number): Promise<IndexEntry | undefined> {
  return withSharedLog(driver, partIndexPath(queue, part), async (log) => {
    const at = Math.floor((await log.size()) / INDEX_ENTRY_SIZE) * INDEX_ENTRY_SIZE - INDEX_ENTRY_SIZE;
    return at < 0 ? undefined : parseIndex(await log.read(at, INDEX_ENTRY_SIZE)).entries[0];
  });
}

/**
 * When the part was last written: the end entry's time, if the index ends at `size` (the
 * part's size: it was sealed and nothing came after); undefined when that is not known.
 */
export function sealedTime(entries: readonly IndexEntry[] | undefined, size: number): number | undefined {
  const last = entries?.at(-1);
  return last && last.offset === size ? last.time : undefined;
}

/** An index up to this size (2,730 entries) is read whole for a search: one read instead of one per step. */
const WHOLE_INDEX_BYTES = 64 * 1024;

/**
 * The last entry of a part's index for which `isBefore` holds (entries ascend: it holds for a
 * prefix), undefined when none does, or "none" when the part has no usable index. A binary
 * search checking one entry per step, so a seek costs the same in a part of any size: in one
 * read of the index when it is small (a call less per step on any driver, a round trip less
 * on a remote one), else reading one entry per step. An entry that fails its crc on the way
 * makes it read the whole index instead (its valid prefix).
 */
export async function findEntry(
  driver: QueueDriver,
  queue: string,
  part: number,
  isBefore: (entry: IndexEntry) => boolean,
): Promise<IndexEntry | undefined | "none"> {
  const searched = await withSharedLog(driver, partIndexPath(queue, part), async (log) => {
    const size = await log.size();
    let lo = 0;
    let hi = Math.floor(size / INDEX_ENTRY_SIZE) - 1;
    if (hi < 0) return "none";
    const whole = size <= WHOLE_INDEX_BYTES ? await log.read(0, size) : undefined;
    const entryAt = async (i: number) => {
      const at = i * INDEX_ENTRY_SIZE;
      return parseIndex(whole ? whole.subarray(at, at + INDEX_ENTRY_SIZE) : await log.read(at, INDEX_ENTRY_SIZE)).entries[0];
    };
    let found: IndexEntry | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const entry = await entryAt(mid);
      if (!entry) return "damaged";
      if (isBefore(entry)) {
        found = entry;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return { found };
  });
  if (searched === undefined) return "none"; // no index file
  if (searched !== "damaged") return searched === "none" ? "none" : searched.found;
  const entries = await readPartIndex(driver, queue, part);
  return entries ? entries.findLast(isBefore) : "none";
}

const reported = new Set<string>();

/** Says once per process and part that a part has no usable index, so a read of it scans. */
export function reportNoIndex(driver: QueueDriver, queue: string, part: number, onProblem: (problem: QueueProblem) => void): void {
  const key = `${driver.storageKey}\u0000${queue}\u0000${part}`;
  if (reported.has(key)) return;
  reported.add(key);
  onProblem({
    code: "NO_INDEX",
    queue,
    part,
    message: `Part ${part} has no usable index (${partIndexPath(queue, part)}: written by the crate, or damaged): reading the part instead.`,
  });
}

/**
 * The writer's side: notes the records due an entry as a batch is built, appends them in one
 * write once the batch's data is written (`flush`), and the end entry on `seal`.
 */
export class PartIndexWriter {
  readonly #log: LogFile;
  readonly #interval: number;
  #size: number;
  /** Seq of the last entry noted (pending included), and of the last one in the file. */
  #lastSeq: number;
  #fileSeq: number;
  #lastTime: number;
  #pending: IndexEntry[] = [];

  private constructor(log: LogFile, interval: number, size: number, last: IndexEntry | undefined) {
    this.#log = log;
    this.#interval = interval;
    this.#size = size;
    this.#lastSeq = this.#fileSeq = last?.seq ?? 0;
    this.#lastTime = last?.time ?? 0;
  }

  /** A new part's index, empty. `fence`: the writer's lock (core/driver.ts). */
  static async create(driver: QueueDriver, queue: string, part: number, interval: number, fence?: DriverLock): Promise<PartIndexWriter> {
    const log = await openIndex(driver, queue, part, fence);
    await log.truncate(0);
    return new PartIndexWriter(log, interval, 0, undefined);
  }

  /**
   * The index of a part the writer recovered (`edge`, `count`: its real end): the valid entries
   * up to there are kept, a torn or stale tail cut off, and the records after the last entry
   * indexed anew. Their time is unknown: they get the time of recovery, which can only keep
   * them longer under retention, never delete them early.
   */
  static async recover(
    driver: QueueDriver,
    queue: string,
    part: number,
    partFile: LogFile,
    end: { edge: number; count: number },
    interval: number,
    onProblem: (problem: QueueProblem) => void,
    fence?: DriverLock,
  ): Promise<PartIndexWriter> {
    const log = await openIndex(driver, queue, part, fence);
    const parsed = parseIndex(await log.read(0, await log.size()));
    const kept = parsed.entries.filter((e) => e.offset <= end.edge && e.seq <= end.count + 1);
    const size = kept.length * INDEX_ENTRY_SIZE;
    if (parsed.damaged || kept.length < parsed.entries.length) await log.truncate(size);
    const writer = new PartIndexWriter(log, interval, size, kept.at(-1));
    const last = kept.at(-1) ?? { seq: 1, offset: 0, time: 0 };
    if (last.offset < end.edge) {
      // A damaged index is said; a missing one (a part of the crate's, of an older v-queue) is simply made.
      if (parsed.damaged)
        onProblem({
          code: "NO_INDEX",
          queue,
          part,
          message: `Rebuilt the damaged index of part ${part} from the part (records after its last good entry are dated at this recovery).`,
        });
      await scanPart(partFile, { from: last.offset, limit: end.edge, chunkSize: 4 * 1024 * 1024, onSkip: () => {} }, (_buf, _view, _at, header) => {
        writer.note(header.seq, header.offset);
        return true;
      });
      await writer.flush();
    }
    return writer;
  }

  /** Notes record `seq` at `offset` (called for every record; cheap unless an entry is due). */
  note(seq: number, offset: number): void {
    if (this.#lastSeq === 0 || seq - this.#lastSeq >= this.#interval) {
      this.#pending.push({ seq, offset, time: 0 });
      this.#lastSeq = seq;
    }
  }

  /** Forgets entries noted for records after `count` (a batch that was not written). */
  rollback(count: number): void {
    this.#pending = this.#pending.filter((e) => e.seq <= count);
    this.#lastSeq = this.#pending.at(-1)?.seq ?? this.#fileSeq;
  }

  /** Appends the entries noted, dated now: call once their records are written. */
  async flush(): Promise<void> {
    this.#lastTime = Math.max(this.#lastTime, Date.now());
    if (this.#pending.length === 0) return;
    const entries = this.#pending;
    this.#pending = [];
    for (const e of entries) e.time = this.#lastTime;
    await this.#append(entries);
  }

  /** Flushes, then marks the part's end (`seq`: its count + 1, `offset`: its size) with the last write's time. */
  async seal(seq: number, offset: number): Promise<void> {
    await this.flush();
    if (seq <= this.#lastSeq && offset > 0) return; // already marked (no record since)
    if (offset === 0) return; // an empty part: nothing to date
    this.#lastSeq = seq;
    await this.#append([{ seq, offset, time: this.#lastTime }]);
  }

  close(): Promise<void> {
    return this.#log.close();
  }

  async #append(entries: IndexEntry[]): Promise<void> {
    const data = encodeEntries(entries);
    await this.#log.append(this.#size, data);
    this.#size += data.length;
    this.#fileSeq = entries.at(-1)!.seq;
  }
}

/** A part's index opened for writing (made if missing), its writes fenced by the writer's lock. */
async function openIndex(driver: QueueDriver, queue: string, part: number, fence: DriverLock | undefined): Promise<LogFile> {
  const log = (await driver.openLog(partIndexPath(queue, part), { create: true }))!;
  return fence ? fencedLog(log, fence) : log;
}

/** Where record `seq` of a part starts, from `from` (an index entry or the part's start), scanning at most to the record. */
export async function scanToSeq(
  log: LogFile,
  part: number,
  from: IndexEntry | undefined,
  seq: number,
): Promise<{ part: number; position: number; count: number } | undefined> {
  const start = from ?? { seq: 1, offset: 0, time: 0 };
  if (start.seq === seq) return { part, position: start.offset, count: seq - 1 };
  const size = await log.size();
  const hopped = await hopToSeq(log, start, seq, size);
  if (hopped !== undefined) return { part, position: hopped, count: seq - 1 };
  let found: { part: number; position: number; count: number } | undefined;
  let end = { part, position: start.offset, count: start.seq - 1 };
  await scanPart(log, { from: start.offset, limit: size, chunkSize: SCAN_CHUNK, onSkip: () => {} }, (_buf, _view, _at, header) => {
    if (header.seq === seq) {
      found = { part, position: header.offset, count: seq - 1 };
      return false;
    }
    end = { part, position: header.offset + HEADER_SIZE + header.length, count: header.seq };
    return header.seq < seq;
  });
  return found ?? (end.count === seq - 1 ? end : undefined);
}

const SCAN_CHUNK = 64 * 1024;

/**
 * Where record `seq` starts, found by hopping from header to header in one read from `start`:
 * each header checks out (magic, type, its own offset) and counts up by one, so the last is
 * record `seq`. Undefined when it is not reached that way (a header that does not check out,
 * the read's end, the part's end): the full scan answers. The bodies' crcs are left to whoever
 * reads them: the full scan, which checks them, lands on the same record (a record with a bad
 * body is stepped over, and its successor found by its own header), at a fraction of the cost.
 */
async function hopToSeq(log: LogFile, start: IndexEntry, seq: number, size: number): Promise<number | undefined> {
  const buf = await log.read(start.offset, Math.max(0, Math.min(SCAN_CHUNK, size - start.offset)));
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (let at = 0, expected = start.seq; at + HEADER_SIZE <= buf.length; expected++) {
    const header = readHeader(buf, view, at, start.offset);
    if (!header || header.seq !== expected) return undefined;
    if (header.seq === seq) return header.offset;
    at += HEADER_SIZE + header.length;
  }
  return undefined;
}

/** Whether an entry names a record that is there (or the part's end): the index is a hint, checked before it is trusted. */
export async function entryHolds(log: LogFile, entry: IndexEntry): Promise<boolean> {
  const size = await log.size();
  if (entry.offset === size) return true;
  return (await readHeaderAt(log, entry.offset))?.seq === entry.seq;
}
