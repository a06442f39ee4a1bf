import type { LogFile, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { parsePushInfo, parseQueueInfo, type PushInfo, type QueueInfo } from "../format/info";
import { partOfDir, pushInfoPath, queueInfoPath, writerLockPath } from "../storage/paths";
import { HEADER_SIZE, MAGIC_V3 } from "../format/record";
import { scanPart } from "./scan";

const decoder = new TextDecoder();
const RECOVERY_CHUNK = 4 * 1024 * 1024;
/** Reads of an info line before it counts as damaged (see `readInfoLine`). */
const INFO_READS = 3;

/** Part ids of a queue, ascending, from its `Q-<id>` directories. */
export async function listParts(driver: QueueDriver, queue: string): Promise<number[]> {
  const ids: number[] = [];
  for (const entry of await driver.list("")) {
    const id = partOfDir(queue, entry);
    if (id !== undefined) ids.push(id);
  }
  return ids.sort((a, b) => a - b);
}

/** Whether `queue` has a file (its info line or a part): a read that creates nothing, for before a lock. */
export async function queueExists(driver: QueueDriver, queue: string): Promise<boolean> {
  return (await driver.readRecord(queueInfoPath(queue))) !== undefined || (await listParts(driver, queue)).length > 0;
}

/**
 * An info line: `value` when it parses, `damaged` when the file exists but does not parse.
 * A line that fails is read again before it counts: a writer in another process rewrites it
 * in place, and a read at that instant can see half of the old line and half of the new.
 */
export async function readInfoLine<T>(
  read: () => Promise<Uint8Array | undefined>,
  parse: (text: string) => T | undefined,
): Promise<{ value: T | undefined; damaged: boolean }> {
  for (let attempt = 1; ; attempt++) {
    const bytes = await read();
    if (!bytes) return { value: undefined, damaged: false };
    const value = parse(decoder.decode(bytes));
    if (value !== undefined) return { value, damaged: false };
    if (attempt >= INFO_READS) return { value: undefined, damaged: bytes.length > 0 };
    await new Promise((resolve) => setTimeout(resolve, attempt));
  }
}

/** The queue info line, or undefined when the file is missing or its crc fails (reported). */
export async function readQueueInfo(driver: QueueDriver, queue: string, onProblem: (problem: QueueProblem) => void): Promise<QueueInfo | undefined> {
  const { value, damaged } = await readInfoLine(
    () => driver.readRecord(queueInfoPath(queue)),
    (text) => parseQueueInfo(text, queue),
  );
  if (damaged) onProblem({ code: "BAD_INFO", queue, message: `${queueInfoPath(queue)} is unreadable or its crc fails; using the part directories.` });
  return value;
}

/** A part's push info line, or undefined when missing or damaged. */
export async function readPushInfo(driver: QueueDriver, queue: string, part: number): Promise<PushInfo | undefined> {
  return (
    await readInfoLine(
      () => driver.readRecord(pushInfoPath(queue, part)),
      (text) => parsePushInfo(text, queue),
    )
  ).value;
}

/**
 * Whether the queue's writer is gone (closed, or died): then no one appends to its parts, and
 * the part files, not the info lines, say where each part ends. False while a writer holds
 * the lock (its info line is the high-water mark: bytes past it may not be durable yet), and
 * when the driver cannot tell.
 */
export async function isWriterGone(driver: QueueDriver, queue: string): Promise<boolean> {
  if (!driver.isLocked) return false;
  return !(await driver.isLocked(writerLockPath(queue)));
}

export interface PartEnd {
  /** Byte size of the valid records. */
  edge: number;
  /** Sequence number of the last valid record (0 for none). */
  count: number;
  /** Damage followed by valid records, kept in place (readers skip it). */
  damage: { offset: number; bytes: number }[];
  /** Bytes at the end that are no whole valid record: a torn write, or damage. */
  tail?: { offset: number; bytes: number };
  /** A v3 record (crate 0.3.x, or compressed) was among those scanned. */
  v3?: true;
}

/** Scans a part from a known record boundary (`from`, `count`) to `size` for its real end. */
export async function scanPartEnd(file: LogFile, from: number, count: number, size: number): Promise<PartEnd> {
  const end: PartEnd = { edge: from, count, damage: [] };
  let skipped: { offset: number; bytes: number } | undefined;
  await scanPart(
    file,
    { from, limit: size, chunkSize: RECOVERY_CHUNK, onSkip: (offset, bytes) => (skipped = { offset, bytes }) },
    (_buf, _view, _at, header) => {
      if (skipped) end.damage.push(skipped);
      skipped = undefined;
      end.edge = header.offset + HEADER_SIZE + header.length;
      end.count = header.seq;
      if (header.v3) end.v3 = true;
      return true;
    },
  );
  if (skipped) end.tail = skipped;
  return end;
}

export interface RecoveredPart {
  /** Byte size of the valid records (the torn tail, if any, is cut off). */
  edge: number;
  /** Sequence number of the last valid record. */
  count: number;
  /** The push info line did not match the part and must be rewritten. */
  infoStale: boolean;
  /**
   * The part is shorter than its push info line said: records that were acknowledged, and
   * that consumers may have read and saved positions past, are gone. The writer starts a new
   * part instead of appending: new records where the lost ones were would sit under those
   * saved positions, and no consumer would get them.
   */
  shrunk?: boolean;
  /**
   * The part holds v3 records (the crate 0.3.x's, or compressed ones): it was left as it is,
   * torn tail and info line included, and the writer must start a new part instead of
   * appending (that would need the part's dictionary and format).
   */
  v3?: boolean;
}

/**
 * Finds the real end of a part after a crash: the part file is the truth, the push info a
 * hint. Scans forward from the hinted edge checking each crc; damage followed by valid
 * records is reported and kept (readers skip it); a damaged tail is cut off and reported.
 */
export async function recoverPart(
  driver: QueueDriver,
  queue: string,
  part: number,
  file: LogFile,
  onProblem: (problem: QueueProblem) => void,
): Promise<RecoveredPart> {
  const size = await file.size();
  const hint = await readPushInfo(driver, queue, part);
  const trusted = hint && hint.edge <= size ? hint : undefined;
  if (hint && !trusted) {
    onProblem({
      code: "BAD_INFO",
      queue,
      part,
      message: `Push info says ${hint.edge} bytes but part ${part} has ${size}; rescanning it, and new records go to a new part.`,
    });
  }
  const end = await scanPartEnd(file, trusted?.edge ?? 0, trusted?.count ?? 0, size);
  for (const { offset, bytes } of end.damage) {
    onProblem({ code: "BAD_RECORD", queue, part, offset, bytes, message: `Skipped ${bytes} damaged bytes at offset ${offset} of part ${part}.` });
  }
  // A part is v2 or v3: its first record says which (or any scanned, or a torn v3 tail).
  if (end.v3 || (await isV3Record(file, 0)) || (end.tail && (await isV3Record(file, end.tail.offset)))) {
    if (end.tail) {
      const { offset, bytes } = end.tail;
      onProblem({
        code: "TORN_TAIL",
        queue,
        part,
        offset,
        bytes,
        message: `Part ${part} (v3) ends in ${bytes} bytes that are no whole record (offset ${offset}); left in place, a new part is started.`,
      });
    }
    return { edge: end.edge, count: end.count, infoStale: false, v3: true };
  }
  if (end.tail) {
    const { offset, bytes } = end.tail;
    onProblem({
      code: "TORN_TAIL",
      queue,
      part,
      offset,
      bytes,
      message: `Cut off ${bytes} bytes of an incomplete or damaged record at the end of part ${part} (offset ${offset}).`,
    });
    await file.truncate(end.edge);
  }
  const recovered: RecoveredPart = { edge: end.edge, count: end.count, infoStale: !hint || hint.edge !== end.edge || hint.count !== end.count };
  if (hint && !trusted) recovered.shrunk = true;
  return recovered;
}

/** Whether a v3 record header (crate 0.3.x) starts at `offset`: its magic, and its own offset. */
export async function isV3Record(file: LogFile, offset: number): Promise<boolean> {
  const head = await file.read(offset, HEADER_SIZE);
  if (head.length < HEADER_SIZE) return false;
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  return view.getUint32(12, true) === MAGIC_V3 && Number(view.getBigUint64(0, true)) === offset;
}
