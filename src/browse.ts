import { browsePartitioned } from "./browse-partitioned";
import { cursorAfter, formatCursor, parseCursor, type ConsumerPosition } from "./cursor";
import type { QueueDriver } from "./driver";
import { VQueueError, type QueueProblem } from "./errors";
import type { Message } from "./message";
import { assertName } from "./names";
import { CONSUMER_DEFAULTS, checkInteger, defaultProblemReporter } from "./options";
import { PartReader } from "./part-reader";
import { readPartitions } from "./partitions";
import { listParts, readQueueInfo } from "./recovery";
import { resolveSeek, type SeekTarget } from "./seek";
import { queueTotals } from "./totals";
import { loadZstd, type ZstdLoader } from "./zstd";

/**
 * Reading a queue without a consumer (the dashboard's message browser, a DLQ looked at): the
 * records are read by the same `PartReader` a consumer reads with (v2 and v3, compressed bodies,
 * damaged records reported and skipped, parts deleted by retention passed with `MISSED`), but no
 * consumer is opened, moved or created and no lock is taken. Pages go forward only: each answer
 * says where the next one starts.
 */

/**
 * Where a page starts: as a seek (`SeekTarget`: a cursor is the position after its message, so
 * the page starts with the message after it, the one a consumer seeking there reads next), but
 * `"latest"` is the newest page: the last `limit` messages, not the empty end (a `maxBytes` that
 * cuts it short leaves `next` set: the rest of it). Pages go forward only; an older page than the
 * newest is reached from an earlier start (`{ part, seq }`, `{ time }`).
 */
export type BrowseFrom = SeekTarget;

export interface BrowseOptions {
  /** @default "earliest" */
  from?: BrowseFrom;
  /** Most messages in the page. @default 50, at most 1000 */
  limit?: number;
  /** The page stops once its bodies reach this many bytes (at least one message). @default 1 MiB */
  maxBytes?: number;
  /** Text as its UTF-8 bytes, not decoded (what the HTTP layer writes out). @default false */
  raw?: boolean;
  zstd?: ZstdLoader;
  onProblem?: (problem: QueueProblem) => void;
  /**
   * A partitioned queue: this partition alone (`from` as for a plain queue, or a composite cursor
   * naming it). Without it a page takes from every partition in turn (browse-partitioned.ts).
   */
  partition?: number;
}

/** A message browsed: a partitioned queue's carries its partition. */
export type BrowsedMessage = Message & { partition?: number };

export interface BrowseResult {
  messages: BrowsedMessage[];
  /** A cursor where the next page starts, or null at the current end of the queue (a partitioned queue's names its partitions). */
  next: string | null;
  /** Where this page stopped, more there or not: the cursor to start after later, to see what comes since. */
  end: string;
  /** Messages retention deleted between `from` and what was read (also reported as `MISSED`). */
  missed: number;
}

export const BROWSE_DEFAULTS = { from: "earliest", limit: 50, maxBytes: 1024 * 1024 } as const;
export const BROWSE_MAX_LIMIT = 1000;

/** Browse options with the page's start and limits set (defaulted and checked once, in `browseMessages`). */
export type PageOptions = BrowseOptions & { from: BrowseFrom; limit: number; maxBytes: number };

function resolvePage(options: BrowseOptions): PageOptions {
  const { from = BROWSE_DEFAULTS.from, limit = BROWSE_DEFAULTS.limit, maxBytes = BROWSE_DEFAULTS.maxBytes } = options;
  checkInteger("limit", limit, 1, BROWSE_MAX_LIMIT);
  checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
  return { ...options, from, limit, maxBytes };
}
/** How the reader names itself in problems it reports (no consumer name can have parentheses). */
const BROWSER = "(browse)";

/** A page of `queue`'s messages from `from`, read without any consumer. `E_NOT_FOUND` when the queue does not exist. */
export async function browseMessages(driver: QueueDriver, queue: string, options: BrowseOptions = {}): Promise<BrowseResult> {
  assertName(queue, "queue");
  const page = resolvePage(options);
  const partitions = await readPartitions(driver, queue);
  if (partitions !== undefined) return browsePartitioned(driver, queue, partitions, page, { page: browseQueue, newestStart: (d, q, limit) => newestPage(d, q, limit, options.onProblem ?? defaultProblemReporter) });
  if (options.partition !== undefined) throw new VQueueError("E_OPTION", `Queue "${queue}" has no partitions: browse it without a partition.`);
  if (typeof options.from === "string" && /^p\d/.test(options.from)) throw new VQueueError("E_OPTION", `Queue "${queue}" has no partitions: give a cursor "<part>.<position>.<count>", not ${JSON.stringify(options.from.slice(0, 60))}.`);
  return browseQueue(driver, queue, page);
}

/** A page of one ordinary queue (a partition is one). */
async function browseQueue(driver: QueueDriver, queue: string, options: PageOptions): Promise<BrowseResult> {
  const { from, limit, maxBytes, raw = false, zstd = loadZstd } = options;
  const report = options.onProblem ?? defaultProblemReporter;
  const parts = await listParts(driver, queue);
  const info = await readQueueInfo(driver, queue, report);
  if (!info && parts.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
  const newest = Math.max(info?.part ?? -1, parts.at(-1) ?? -1);

  let missed = 0;
  const onProblem = (problem: QueueProblem) => {
    if (problem.code === "MISSED") missed += problem.missed ?? 0;
    report(problem);
  };
  const start = await startOf(driver, queue, from, limit, parts, newest, onProblem);
  const startCursor = formatCursor(start);
  const reader = new PartReader(queue, BROWSER, driver, { onProblem, readChunkBytes: CONSUMER_DEFAULTS.readChunkBytes, zstd });
  try {
    await reader.openAt(start);
    // No position to keep here: a failure fails the page (cut short, it would look like the end).
    const messages = await reader.read(limit, maxBytes, !raw, false);
    const last = messages.at(-1);
    const full = messages.length >= limit || messages.reduce((sum, m) => sum + m.size, 0) >= maxBytes;
    // A full page says whether more is there now; a short one stopped at the end.
    const more = last !== undefined && full && (reader.hasBuffered || (reader.localEdge() ?? (await reader.refresh())));
    return { messages, next: more ? cursorAfter(last) : null, end: last ? cursorAfter(last) : startCursor, missed };
  } finally {
    await reader.close();
  }
}

/** Where the page starts, as a position the reader opens. */
async function startOf(driver: QueueDriver, queue: string, from: BrowseFrom, limit: number, parts: number[], newest: number, onProblem: (problem: QueueProblem) => void): Promise<ConsumerPosition> {
  if (from === "latest") return newestPage(driver, queue, limit, onProblem);
  if (typeof from === "string" && from !== "earliest") {
    const cursor = parseCursor(from);
    // The cursor of a page whose part retention deleted since: the reader goes on at the next part (MISSED), as a consumer does.
    if (!parts.includes(cursor.part) && cursor.part < newest) return cursor;
    // The end of the newest part, not made yet: nothing to read, and no error.
    if (cursor.part > (parts.at(-1) ?? -1) && cursor.part <= newest && cursor.position === 0 && cursor.count === 0) return cursor;
  }
  return resolveSeek(driver, queue, from, onProblem);
}

/** The position `limit` messages before the end (counted over the parts' totals), or the oldest. */
async function newestPage(driver: QueueDriver, queue: string, limit: number, onProblem: (problem: QueueProblem) => void): Promise<ConsumerPosition> {
  const parts = (await queueTotals(driver, queue))?.parts() ?? [];
  let need = limit;
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    if (part.messages >= need) return resolveSeek(driver, queue, { part: part.id, seq: part.messages - need + 1 }, onProblem);
    need -= part.messages;
  }
  return resolveSeek(driver, queue, "earliest", onProblem);
}
