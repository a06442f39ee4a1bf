/**
 * Browsing a partitioned queue (partitions/declaration.ts) without a consumer. Records carry no time, so
 * the partitions cannot be merged in the order they were written: a page takes from each
 * partition in turn, an even share of what is left each round, and each message says its
 * partition. `next` is a composite cursor (partitions/cursor.ts) naming where every partition
 * read so far stopped; a partition it does not name starts at its oldest message. A page that
 * filled before some partition's turn cannot tell whether that one holds more: `next` is then
 * set, and the last page may be empty. One partition alone (`partition`) is browsed as an
 * ordinary queue.
 */
import type { BrowseResult, BrowsedMessage, BrowseFrom, PageOptions } from "./browse-types";
import { CURSOR_RE, formatCursor, type ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { checkInteger } from "../options/queue";
import { formatPartitionedCursor, parsePartitionedCursor } from "../partitions/cursor";
import { neverWritten, partitionName } from "../partitions/declaration";
import { resolveSeek } from "../log/seek";
import { crc32 } from "../format/crc32";

/** How one ordinary queue (a partition) is read: inspect/browse.ts's, passed in (it calls this module). */
interface QueueBrowser {
  page: (driver: QueueDriver, queue: string, options: PageOptions) => Promise<BrowseResult>;
  /** Where the newest page of `limit` messages starts. */
  newestStart: (driver: QueueDriver, queue: string, limit: number) => Promise<ConsumerPosition>;
}

interface PartitionTurn {
  from: BrowseFrom;
  /** Where its reads stopped (undefined: not read, or never written). */
  end: string | undefined;
  more: boolean;
}

/** A page of partitioned `queue` (`count` partitions); `browser` reads each partition's. */
export async function browsePartitioned(driver: QueueDriver, queue: string, count: number, options: PageOptions, browser: QueueBrowser): Promise<BrowseResult> {
  const { from, limit, maxBytes, partition } = options;
  if (partition !== undefined) {
    checkInteger("partition", partition, 0, count - 1);
    return browseOne(driver, queue, count, partition, options, browser);
  }
  if (typeof from === "object" && "part" in from) {
    throw new VQueueError("E_OPTION", `Queue "${queue}" has ${count} partitions: a part and seq name a message of one partition, so give the partition too.`);
  }
  if (typeof from === "string" && CURSOR_RE.test(from)) {
    throw new VQueueError(
      "E_OPTION",
      `Queue "${queue}" has ${count} partitions: give a cursor as "p<partition>:${from}" (as its messages and pages give), or browse one partition.`,
    );
  }
  const named = typeof from === "string" && from !== "earliest" && from !== "latest" ? parseNamed(from, count) : undefined;
  const turns: PartitionTurn[] = Array.from({ length: count }, (_, index) => {
    const cursor = named?.get(index);
    return { from: named ? (cursor ?? "earliest") : from, end: cursor, more: true };
  });

  const messages: BrowsedMessage[] = [];
  let bytes = 0;
  let missed = 0;
  // Each page's turns start at a partition picked from where it starts: with more partitions
  // than `limit`, the later ones come up too, not always the first `limit`.
  const first = crc32(new TextEncoder().encode(typeof from === "string" ? from : JSON.stringify(from))) % count;
  const order = Array.from({ length: count }, (_, i) => (first + i) % count);
  const firstShare = Math.max(1, Math.floor(limit / count));
  for (let open = order; open.length > 0 && messages.length < limit && bytes < maxBytes; open = open.filter((index) => turns[index]!.more)) {
    const share = Math.max(1, Math.floor((limit - messages.length) / open.length));
    for (const index of open) {
      if (messages.length >= limit || bytes >= maxBytes) break;
      const turn = turns[index]!;
      const page = await readTurn(driver, partitionName(queue, index), turn.from, options, Math.min(share, limit - messages.length), maxBytes - bytes, browser);
      if (!page) {
        turn.more = false; // never written: nothing to read, and it starts at its oldest later
        continue;
      }
      for (const m of page.messages) {
        messages.push(Object.assign(m, { partition: index }));
        bytes += m.size;
      }
      missed += page.missed;
      turn.end = page.end;
      turn.from = page.end;
      turn.more = page.next !== null;
    }
  }
  // A partition not reached this page (it filled first), from a time or the newest: where it
  // would have started, so that the next page begins it there, not at its oldest (nor at its
  // end: its newest messages would never show).
  for (const [index, turn] of turns.entries()) {
    if (turn.end !== undefined || !(turn.from === "latest" || typeof turn.from === "object")) continue;
    const name = partitionName(queue, index);
    const start = await (turn.from === "latest" ? browser.newestStart(driver, name, firstShare) : resolveSeek(driver, name, turn.from)).catch(neverWritten);
    if (start) turn.end = formatCursor(start);
  }
  const ends = turns.flatMap((turn, index): [number, string][] => (turn.end === undefined ? [] : [[index, turn.end]]));
  const end = ends.length > 0 ? formatPartitionedCursor(ends) : "earliest";
  return { messages, next: turns.some((turn) => turn.more) ? end : null, end, missed };
}

/** One partition alone, its cursors composite (`p3:0.64.2`) as a partitioned queue's are. */
async function browseOne(
  driver: QueueDriver,
  queue: string,
  count: number,
  partition: number,
  options: PageOptions,
  browser: QueueBrowser,
): Promise<BrowseResult> {
  let from = options.from;
  if (typeof from === "string" && from.startsWith("p")) {
    const named = parseNamed(from, count);
    const cursor = named.get(partition);
    if (cursor === undefined || named.size > 1)
      throw new VQueueError("E_OPTION", `Cursor ${JSON.stringify(from.slice(0, 200))} does not name partition ${partition} alone: give its own cursor.`);
    from = cursor;
  }
  const page = await browser.page(driver, partitionName(queue, partition), { ...options, from, partition: undefined }).catch(neverWritten);
  // Never written: it will start at part 0.
  if (!page) return { messages: [], next: null, end: formatPartitionedCursor([[partition, "0.0.0"]]), missed: 0 };
  const name = (cursor: string) => formatPartitionedCursor([[partition, cursor]]);
  return {
    messages: page.messages.map((m) => Object.assign(m, { partition })),
    next: page.next === null ? null : name(page.next),
    end: name(page.end),
    missed: page.missed,
  };
}

function readTurn(
  driver: QueueDriver,
  name: string,
  from: BrowseFrom,
  options: PageOptions,
  limit: number,
  maxBytes: number,
  browser: QueueBrowser,
): Promise<BrowseResult | undefined> {
  return browser.page(driver, name, { ...options, from, limit, maxBytes, partition: undefined }).catch(neverWritten);
}

/** A composite cursor given to browse: a malformed one is a bad request (`E_OPTION`), not a conflict. */
function parseNamed(text: string, count: number): Map<number, string> {
  try {
    return parsePartitionedCursor(text, count);
  } catch (error) {
    throw VQueueError.isError(error) ? new VQueueError("E_OPTION", error.message) : error;
  }
}
