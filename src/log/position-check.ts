import type { ConsumerPosition } from "../format/position";
import type { LogFile, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { withSharedLog } from "../storage/handles";
import { partPath } from "../storage/paths";
import { HEADER_SIZE } from "../format/record";
import type { StartPosition } from "../options/queue";
import { isWriterGone, readPushInfo, scanPartEnd } from "./recovery";
import { readHeaderAt, scanPart } from "./scan";
import { entryHolds, findEntry } from "./part-index";
import { reportMissed } from "./missed";

/**
 * Positions from outside the running consumer, checked against the part files: a saved
 * position (`Q_info_pop_C`, which a crash, a truncated part or a hand edit can leave
 * pointing nowhere) and a cursor handed out by an earlier process.
 */

const SCAN_CHUNK = 1024 * 1024;

/**
 * Where a consumer resumes from its saved position: the position itself when its part
 * exists and holds it (a record starts there whose sequence number follows the saved count,
 * or a record with that count ends there); otherwise reported, and the start of the last
 * valid record before it (the part was cut short and written again, or replaced), the end of
 * the last valid record of a part that is shorter than the position, the start of the next
 * existing part, or `fallback` (a part newer than every part of the queue: its parts were
 * wiped and written again from part 0, or the position file was restored from a backup).
 */
export async function checkSavedPosition(
  driver: QueueDriver,
  queue: string,
  consumer: string,
  saved: ConsumerPosition,
  current: { parts: number[]; infoPart: number | undefined },
  onProblem: (problem: QueueProblem) => void,
  fallback: () => Promise<ConsumerPosition>,
  onUntrusted: () => void = () => {},
): Promise<ConsumerPosition> {
  const { parts, infoPart } = current;
  const at = `byte ${saved.position} of part ${saved.part} after ${saved.count} record${saved.count === 1 ? "" : "s"}`;
  // `trusted`: the parts after the position are what they were (a part deleted before them), so what a shared consumer keeps above it still holds.
  const report = (message: string, trusted = false) => {
    if (!trusted) onUntrusted();
    onProblem({ code: "BAD_POSITION", queue, part: saved.part, offset: saved.position, message: `Saved position of consumer "${consumer}" ${message}` });
  };
  const inPart = !parts.includes(saved.part)
    ? undefined
    : await withSharedLog(driver, partPath(queue, saved.part), async (file) => {
        const size = await file.size();
        if (saved.position > size) {
          const end = await scanPartEnd(file, 0, 0, size);
          report(`is byte ${saved.position} of part ${saved.part}, which has only ${size} bytes; resuming after its last valid record (byte ${end.edge}).`);
          return { part: saved.part, position: end.edge, count: end.count };
        }
        if (await holdsPosition(driver, queue, file, saved)) return saved;
        const before = await lastRecordBefore(driver, queue, file, saved);
        const resume = { part: saved.part, position: before?.offset ?? 0, count: before ? before.seq - 1 : 0 };
        report(
          `is ${at}, where no record follows record ${saved.count} (the part was cut short and written again, or replaced); resuming at its last valid record before it (byte ${resume.position}, record ${resume.count + 1}).`,
        );
        return resume;
      });
  if (inPart) return inPart;
  const last = parts.at(-1) ?? -1;
  // A part not made yet (the queue's newest, which the queue line names, still empty) is a fine place to wait.
  // Without a readable queue line, the newest part is not known: such a position is waited at, as the crate does.
  if (saved.position === 0 && saved.count === 0 && saved.part > last && (infoPart === undefined || saved.part <= infoPart)) return saved;
  const next = parts.find((id) => id > saved.part);
  if (next !== undefined && (await reportMissed(driver, queue, consumer, saved, next, onProblem))) return { part: next, position: 0, count: 0 };
  if (next !== undefined) {
    report(`names part ${saved.part}, which does not exist; resuming at part ${next}.`, true);
    return { part: next, position: 0, count: 0 };
  }
  const start = await fallback();
  const newest = Math.max(last, infoPart ?? -1);
  report(
    `names part ${saved.part}, ${saved.part > newest ? `newer than every part of the queue (its newest is ${newest})` : "which does not exist, and no later part does"}; starting over at part ${start.part}, byte ${start.position}.`,
  );
  return start;
}

/**
 * Whether `position` (saved by an earlier process: a shared consumer's high-water mark, say)
 * still names the place it named then: see `holdsPosition`.
 */
export async function positionHolds(driver: QueueDriver, queue: string, position: ConsumerPosition): Promise<boolean> {
  const held = await withSharedLog(
    driver,
    partPath(queue, position.part),
    async (file) => position.position <= (await file.size()) && (await holdsPosition(driver, queue, file, position)),
  );
  return held ?? false;
}

/**
 * Whether a saved position is still where the consumer left it: a record starts there whose
 * sequence number follows the saved count; or the last valid record before it has that count
 * and ends at or before it (at the end of what is written, or with damaged bytes in between
 * that the consumer stepped over).
 */
async function holdsPosition(driver: QueueDriver, queue: string, file: LogFile, saved: ConsumerPosition): Promise<boolean> {
  if (saved.position === 0) return saved.count === 0;
  const header = await readHeaderAt(file, saved.position);
  if (header?.seq === saved.count + 1) return true;
  if (header && header.seq <= saved.count) return false;
  if (!header) {
    const push = await readPushInfo(driver, queue, saved.part);
    if (push?.edge === saved.position) return push.count === saved.count;
  }
  const before = await lastRecordBefore(driver, queue, file, saved);
  return before ? before.end <= saved.position && before.seq === saved.count : saved.count === 0;
}

/**
 * The last valid record of the part that starts before `saved`: scanned from the nearest index
 * entry before it that holds, or from the part's start.
 */
async function lastRecordBefore(
  driver: QueueDriver,
  queue: string,
  file: LogFile,
  saved: ConsumerPosition,
): Promise<{ offset: number; end: number; seq: number } | undefined> {
  const entry = await findEntry(driver, queue, saved.part, (e) => e.offset < saved.position);
  const from = typeof entry === "object" && (await entryHolds(file, entry)) ? entry.offset : 0;
  let before: { offset: number; end: number; seq: number } | undefined;
  await scanPart(file, { from, limit: await file.size(), chunkSize: SCAN_CHUNK, onSkip: () => {} }, (_buf, _view, _at, header) => {
    if (header.offset >= saved.position) return false;
    before = { offset: header.offset, end: header.offset + HEADER_SIZE + header.length, seq: header.seq };
    return true;
  });
  return before;
}

/**
 * Whether `target` is where a record of its part ends, with `target.count` records up to
 * there: scans from `from`, a known record boundary of the same part (or its start).
 * A cursor that passes names a real position in the queue, handed out by any process.
 */
export async function isRecordBoundary(file: LogFile, from: ConsumerPosition, target: ConsumerPosition): Promise<boolean> {
  if (target.position === from.position) return target.count === from.count;
  if (target.position < from.position || target.position > (await file.size())) return false;
  let found = false;
  await scanPart(file, { from: from.position, limit: target.position, chunkSize: SCAN_CHUNK, onSkip: () => {} }, (_buf, _view, _at, header) => {
    const end = header.offset + HEADER_SIZE + header.length;
    if (end === target.position) found = header.seq === target.count;
    return end < target.position;
  });
  return found;
}

/**
 * Where a part really ends: its push info line while a writer appends to it, and the part
 * file itself (scanned past the line) once nobody does (`fromFile`): after a crash or a
 * power cut the line may lag behind records that were acknowledged.
 */
export async function readPartEnd(driver: QueueDriver, queue: string, part: number, fromFile: boolean): Promise<{ edge: number; count: number }> {
  const push = await readPushInfo(driver, queue, part);
  const hint = { edge: push?.edge ?? 0, count: push?.count ?? 0 };
  if (!fromFile) return hint;
  // The info line says where the part ends, and the part is that long: nothing to scan, nothing to open.
  if (push && driver.sizeOf && (await driver.sizeOf(partPath(queue, part))) === hint.edge) return hint;
  const end = await withSharedLog(driver, partPath(queue, part), async (file) => {
    const size = await file.size();
    const from = hint.edge <= size ? hint : { edge: 0, count: 0 };
    if (from.edge === size) return from;
    const scanned = await scanPartEnd(file, from.edge, from.count, size);
    return { edge: scanned.edge, count: scanned.count };
  });
  return end ?? hint;
}

/** Where a consumer with no (usable) saved position starts: the oldest part, or the current end. */
export async function startPosition(
  driver: QueueDriver,
  queue: string,
  start: StartPosition,
  parts: number[],
  infoPart: number | undefined,
): Promise<ConsumerPosition> {
  if (start === "earliest") return { part: parts[0] ?? infoPart ?? 0, position: 0, count: 0 };
  const part = Math.max(infoPart ?? 0, parts.at(-1) ?? 0);
  const end = await readPartEnd(driver, queue, part, await isWriterGone(driver, queue));
  return { part, position: end.edge, count: end.count };
}
