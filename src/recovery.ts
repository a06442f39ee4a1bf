import type { FileHandle, QueueDriver } from "./driver";
import type { QueueProblem } from "./errors";
import { parsePushInfo, parseQueueInfo, type PushInfo, type QueueInfo } from "./info";
import { partOfDir, pushInfoPath, queueInfoPath } from "./paths";
import { HEADER_SIZE } from "./record";
import { scanPart } from "./scan";

const decoder = new TextDecoder();
const RECOVERY_CHUNK = 4 * 1024 * 1024;

/** Part ids of a queue, ascending, from its `Q-<id>` directories. */
export async function listParts(driver: QueueDriver, queue: string): Promise<number[]> {
  const ids: number[] = [];
  for (const entry of await driver.list("")) {
    const id = partOfDir(queue, entry);
    if (id !== undefined) ids.push(id);
  }
  return ids.sort((a, b) => a - b);
}

/** The queue info line, or undefined when the file is missing or its crc fails (reported). */
export async function readQueueInfo(
  driver: QueueDriver,
  queue: string,
  onProblem: (problem: QueueProblem) => void,
): Promise<QueueInfo | undefined> {
  const bytes = await driver.readFile(queueInfoPath(queue));
  if (!bytes) return undefined;
  const info = parseQueueInfo(decoder.decode(bytes), queue);
  if (!info) onProblem({ code: "BAD_INFO", queue, message: `${queueInfoPath(queue)} is unreadable or its crc fails; using the part directories.` });
  return info;
}

/** A part's push info line, or undefined when missing or damaged. */
export async function readPushInfo(driver: QueueDriver, queue: string, part: number): Promise<PushInfo | undefined> {
  const bytes = await driver.readFile(pushInfoPath(queue, part));
  return bytes ? parsePushInfo(decoder.decode(bytes), queue) : undefined;
}

export interface RecoveredPart {
  /** Byte size of the valid records (the torn tail, if any, is cut off). */
  edge: number;
  /** Sequence number of the last valid record. */
  count: number;
  /** The push info line did not match the part and must be rewritten. */
  infoStale: boolean;
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
  file: FileHandle,
  onProblem: (problem: QueueProblem) => void,
): Promise<RecoveredPart> {
  const size = await file.size();
  const hint = await readPushInfo(driver, queue, part);
  const trusted = hint && hint.edge <= size ? hint : undefined;
  if (hint && !trusted) {
    onProblem({ code: "BAD_INFO", queue, part, message: `Push info says ${hint.edge} bytes but part ${part} has ${size}; rescanning it.` });
  }
  let edge = trusted?.edge ?? 0;
  let count = trusted?.count ?? 0;
  let tail: { offset: number; bytes: number } | undefined;
  await scanPart(
    file,
    {
      from: edge,
      limit: size,
      chunkSize: RECOVERY_CHUNK,
      onSkip: (offset, bytes) => {
        tail = { offset, bytes };
      },
    },
    (_buf, _view, _at, header) => {
      if (tail) {
        onProblem({ code: "BAD_RECORD", queue, part, offset: tail.offset, bytes: tail.bytes, message: `Skipped ${tail.bytes} damaged bytes at offset ${tail.offset} of part ${part}.` });
        tail = undefined;
      }
      edge = header.offset + HEADER_SIZE + header.length;
      count = header.seq;
      return true;
    },
  );
  if (tail) {
    onProblem({ code: "TORN_TAIL", queue, part, offset: tail.offset, bytes: tail.bytes, message: `Cut off ${tail.bytes} bytes of an incomplete or damaged record at the end of part ${part} (offset ${tail.offset}).` });
    await file.truncate(edge);
  }
  return { edge, count, infoStale: !hint || hint.edge !== edge || hint.count !== count };
}
