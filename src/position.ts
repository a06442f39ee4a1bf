import type { ConsumerPosition } from "./cursor";
import type { LogFile, QueueDriver } from "./driver";
import type { QueueProblem } from "./errors";
import { withSharedLog } from "./handles";
import { partPath } from "./paths";
import { HEADER_SIZE } from "./record";
import type { StartPosition } from "./options";
import { isWriterGone, readPushInfo, scanPartEnd } from "./recovery";
import { scanPart } from "./scan";
import { reportMissed } from "./missed";

/**
 * Positions from outside the running consumer, checked against the part files: a saved
 * position (`Q_info_pop_C`, which a crash, a truncated part or a hand edit can leave
 * pointing nowhere) and a cursor handed out by an earlier process.
 */

const SCAN_CHUNK = 1024 * 1024;

/**
 * Where a consumer resumes from its saved position: the position itself when its part
 * exists and holds it; otherwise reported, and the start of the next existing part, the
 * end of the last valid record of a part that is shorter than the position, or `fallback`.
 */
export async function checkSavedPosition(
  driver: QueueDriver,
  queue: string,
  consumer: string,
  saved: ConsumerPosition,
  parts: number[],
  onProblem: (problem: QueueProblem) => void,
  fallback: () => Promise<ConsumerPosition>,
): Promise<ConsumerPosition> {
  const report = (message: string) => onProblem({ code: "BAD_POSITION", queue, part: saved.part, offset: saved.position, message: `Saved position of consumer "${consumer}" ${message}` });
  const inPart = !parts.includes(saved.part)
    ? undefined
    : await withSharedLog(driver, partPath(queue, saved.part), async (file) => {
        const size = await file.size();
        if (saved.position <= size) return saved;
        const end = await scanPartEnd(file, 0, 0, size);
        report(`is byte ${saved.position} of part ${saved.part}, which has only ${size} bytes; resuming after its last valid record (byte ${end.edge}).`);
        return { part: saved.part, position: end.edge, count: end.count };
      });
  if (inPart) return inPart;
  // A part not made yet (the queue's newest, still empty) is a fine place to wait.
  const last = parts.at(-1);
  if (saved.position === 0 && saved.count === 0 && (last === undefined || saved.part > last)) return saved;
  const next = parts.find((id) => id > saved.part);
  if (next !== undefined && (await reportMissed(driver, queue, consumer, saved, next, onProblem))) return { part: next, position: 0, count: 0 };
  if (next !== undefined) {
    report(`names part ${saved.part}, which does not exist; resuming at part ${next}.`);
    return { part: next, position: 0, count: 0 };
  }
  const start = await fallback();
  report(`names part ${saved.part}, which does not exist, and no later part does; starting over at part ${start.part}, byte ${start.position}.`);
  return start;
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
export async function startPosition(driver: QueueDriver, queue: string, start: StartPosition, parts: number[], infoPart: number | undefined): Promise<ConsumerPosition> {
  if (start === "earliest") return { part: parts[0] ?? infoPart ?? 0, position: 0, count: 0 };
  const part = Math.max(infoPart ?? 0, parts.at(-1) ?? 0);
  const end = await readPartEnd(driver, queue, part, await isWriterGone(driver, queue));
  return { part, position: end.edge, count: end.count };
}
