import { browsePartitioned } from "./browse-partitioned";
import type { BrowseFrom, BrowseOptions, BrowseResult, PageOptions } from "./browse-types";
import { cursorAfter, formatCursor, parseCursor, type ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { VQueueError, type QueueProblem } from "../core/errors";
import { assertName } from "../core/names";
import { CONSUMER_DEFAULTS, checkInteger, defaultProblemReporter } from "../options/queue";
import { PartReader } from "../log/part-reader";
import { readPartitions } from "../partitions/declaration";
import { listParts, readQueueInfo } from "../log/recovery";
import { resolveSeek } from "../log/seek";
import { queueTotals } from "../log/totals";
import { loadZstd } from "../compression/zstd";

/**
 * Reading a queue without a consumer (the dashboard's message browser, a DLQ looked at): the
 * records are read by the same `PartReader` a consumer reads with (v2 and v3, compressed bodies,
 * damaged records reported and skipped, parts deleted by retention passed with `MISSED`), but no
 * consumer is opened, moved or created and no lock is taken. Pages go forward only: each answer
 * says where the next one starts.
 */

export type { BrowseFrom, BrowseOptions, BrowsedMessage, BrowseResult } from "./browse-types";

export const BROWSE_DEFAULTS = { from: "earliest", limit: 50, maxBytes: 1024 * 1024 } as const;
export const BROWSE_MAX_LIMIT = 1000;

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
  if (partitions !== undefined)
    return browsePartitioned(driver, queue, partitions, page, {
      page: browseQueue,
      newestStart: (d, q, limit) => newestPage(d, q, limit, options.onProblem ?? defaultProblemReporter),
    });
  if (options.partition !== undefined) throw new VQueueError("E_OPTION", `Queue "${queue}" has no partitions: browse it without a partition.`);
  if (typeof options.from === "string" && /^p\d/.test(options.from))
    throw new VQueueError(
      "E_OPTION",
      `Queue "${queue}" has no partitions: give a cursor "<part>.<position>.<count>", not ${JSON.stringify(options.from.slice(0, 60))}.`,
    );
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
async function startOf(
  driver: QueueDriver,
  queue: string,
  from: BrowseFrom,
  limit: number,
  parts: number[],
  newest: number,
  onProblem: (problem: QueueProblem) => void,
): Promise<ConsumerPosition> {
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
