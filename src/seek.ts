import { parseCursor, type ConsumerPosition } from "./cursor";
import type { LogFile, QueueDriver } from "./driver";
import { VQueueError } from "./errors";
import { withSharedLog } from "./handles";
import { partPath } from "./paths";
import { isRecordBoundary, startPosition } from "./position";
import { HEADER_SIZE } from "./record";
import { listParts, readQueueInfo } from "./recovery";
import { scanPart } from "./scan";

/**
 * Where a consumer may be moved: the oldest message, the end (only what comes next), a
 * cursor (the position after a message, from any process), or a message by its part and
 * sequence number (the consumer then reads it next).
 */
export type SeekTarget = "earliest" | "latest" | (string & {}) | { part: number; seq: number };

const SCAN_CHUNK = 1024 * 1024;

/** The position a seek target names, checked against the part files (`E_CURSOR` when it names none). */
export async function resolveSeek(driver: QueueDriver, queue: string, target: SeekTarget): Promise<ConsumerPosition> {
  if (target === "earliest" || target === "latest") {
    const parts = await listParts(driver, queue);
    const info = await readQueueInfo(driver, queue, () => {});
    return startPosition(driver, queue, target as "earliest" | "latest", parts, info?.part);
  }
  if (typeof target === "string") {
    const position = parseCursor(target);
    if (!(await withSharedLog(driver, partPath(queue, position.part), (log) => isRecordBoundary(log, { part: position.part, position: 0, count: 0 }, position)))) {
      throw new VQueueError("E_CURSOR", `Cannot seek to ${target}: it names no message end in queue "${queue}".`);
    }
    return position;
  }
  const { part, seq } = target ?? {};
  if (!Number.isSafeInteger(part) || part < 0 || !Number.isSafeInteger(seq) || seq < 1) {
    throw new VQueueError("E_CURSOR", `Cannot seek to ${JSON.stringify(target)}: use "earliest", "latest", a cursor, or { part, seq } with part >= 0 and seq >= 1.`);
  }
  const found = await withSharedLog(driver, partPath(queue, part), (log) => findSeq(log, part, seq));
  if (!found) throw new VQueueError("E_CURSOR", `Cannot seek to message ${seq} of part ${part} of queue "${queue}": there is no such message.`);
  return found;
}

/** The position before record `seq` of a part (or its end, right after record `seq - 1`). */
async function findSeq(log: LogFile, part: number, seq: number): Promise<ConsumerPosition | undefined> {
  let found: ConsumerPosition | undefined;
  let end: ConsumerPosition = { part, position: 0, count: 0 };
  await scanPart(log, { from: 0, limit: await log.size(), chunkSize: SCAN_CHUNK, onSkip: () => {} }, (_buf, _view, _at, header) => {
    if (header.seq === seq) {
      found = { part, position: header.offset, count: seq - 1 };
      return false;
    }
    end = { part, position: header.offset + HEADER_SIZE + header.length, count: header.seq };
    return header.seq < seq;
  });
  return found ?? (end.count === seq - 1 ? end : undefined);
}
