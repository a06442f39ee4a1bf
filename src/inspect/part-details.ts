import { LENGTH_PREFIX } from "../compression/part-codec";
import type { QueueDriver } from "../core/driver";
import { withSharedLog } from "../storage/handles";
import { parseIndex, INDEX_ENTRY_SIZE } from "../log/part-index";
import { partIndexPath, partPath } from "../storage/paths";
import { HEADER_SIZE } from "../format/record";
import { scanPart } from "../log/scan";
import type { PartTotals } from "../log/totals";

/**
 * What the dashboard's queue page shows of each part beyond its totals: its record format, how
 * well its bodies compress, when it was made. The format and the ratio need the part's records
 * (the ratio: the length each compressed body announces, no decompression), so each part is
 * read once per process, and at most its first SAMPLE_BYTES: a queue page must not read a
 * queue of 256 MiB parts whole, nor read on behind a writer at full speed. The ratio is that
 * sample's (the writer's first 128 KiB of a part are raw while its dictionary is built: the
 * sample goes past them). Kept bounded, least recently used first, as log/totals.ts keeps queues.
 * A call scans at most SCANS_PER_CALL parts not seen yet, newest first; the others answer
 * null until a later call reaches them. A part whose size went down (the queue deleted and
 * made again: ids are reused) is scanned anew.
 */
export interface PartDetails extends PartTotals {
  /** The record format of its first valid record (null: no record yet). */
  format: "v2" | "v3" | null;
  /** Body bytes before compression / bytes stored, over its compressed records (null: none). */
  compressionRatio: number | null;
  /** When its first record was written (ms since the epoch) from the part's index; null without one. */
  createdAt: number | null;
}

interface Scanned {
  /** Bytes of the part scanned so far (always a record boundary, or past a damaged region). */
  scanned: number;
  format: "v2" | "v3" | null;
  raw: number;
  stored: number;
  createdAt: number | null;
}

/** Parts whose details are kept (a sealed part of 1,000 queues x 10 parts is 10,000 small objects). */
const MAX_PARTS = 20_000;
const SCAN_CHUNK = 1024 * 1024;
/** The most of a part read for its details. */
const SAMPLE_BYTES = 2 * 1024 * 1024;
/** Parts scanned by one call at most (a queue of thousands of parts fills in over a few page loads). */
const SCANS_PER_CALL = 32;
/** Per storage, queue and part; a promise so that concurrent calls scan a part once. */
const cache = new Map<string, Promise<Scanned>>();

/** The details of `parts` (from `queueTotals(...).parts()`, oldest first): the last one counts as the newest. */
export async function partDetails(driver: QueueDriver, queue: string, parts: readonly PartTotals[]): Promise<PartDetails[]> {
  let scans = SCANS_PER_CALL;
  const out: PartDetails[] = [];
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    const kept = cache.get(keyOf(driver, queue, part.id));
    const known = kept !== undefined || scans-- > 0;
    out.push({ ...part, ...summary(known ? await details(driver, queue, part, i < parts.length - 1) : UNKNOWN) });
  }
  return out.reverse();
}

const UNKNOWN: Scanned = { scanned: 0, format: null, raw: 0, stored: 0, createdAt: null };
const keyOf = (driver: QueueDriver, queue: string, part: number) => `${driver.storageKey}\u0000${queue}\u0000${part}`;

/** Forgets the parts kept of `queue` (a delete, a purge in this process), or of every queue (tests). */
export function forgetPartDetails(driver?: QueueDriver, queue?: string): void {
  if (!driver || queue === undefined) return cache.clear();
  // A deleted queue's part ids come back when it is made again: nothing kept of the old ones holds.
  const prefix = `${driver.storageKey}\u0000${queue}\u0000`;
  for (const key of cache.keys()) if (key.startsWith(prefix)) cache.delete(key);
}

function summary(scanned: Scanned): Pick<PartDetails, "format" | "compressionRatio" | "createdAt"> {
  return { format: scanned.format, compressionRatio: scanned.stored > 0 ? scanned.raw / scanned.stored : null, createdAt: scanned.createdAt };
}

async function details(driver: QueueDriver, queue: string, part: PartTotals, sealed: boolean): Promise<Scanned> {
  const key = keyOf(driver, queue, part.id);
  const kept = cache.get(key);
  if (kept) cache.delete(key); // re-inserted last: least recently used first
  const run = (async () => {
    const before = kept && (await kept.catch(() => undefined));
    // The newest part may get its first index entry later; a sealed one without an index never does.
    const goal = Math.min(part.bytes, SAMPLE_BYTES);
    if (before && before.scanned >= goal && before.scanned <= part.bytes && (sealed || before.createdAt !== null)) return before;
    // Bytes scanned before and still there: go on from them; a part that shrank is another part.
    const from = before && before.scanned <= part.bytes ? before : { scanned: 0, format: null, raw: 0, stored: 0, createdAt: null };
    return scan(driver, queue, part, from);
  })();
  cache.set(key, run);
  if (cache.size > MAX_PARTS) cache.delete(cache.keys().next().value!);
  run.catch(() => cache.get(key) === run && cache.delete(key));
  return run;
}

async function scan(driver: QueueDriver, queue: string, part: PartTotals, from: Scanned): Promise<Scanned> {
  const next = { ...from };
  next.createdAt ??= await firstIndexTime(driver, queue, part.id);
  const limit = Math.min(part.bytes, SAMPLE_BYTES);
  if (next.scanned >= limit) return next;
  await withSharedLog(driver, partPath(queue, part.id), async (log) => {
    const result = await scanPart(log, { from: next.scanned, limit, chunkSize: SCAN_CHUNK, onSkip: () => {} }, (_buf, view, at, header) => {
      next.format ??= header.v3 ? "v3" : "v2";
      if (header.compressed && header.length >= LENGTH_PREFIX) {
        next.raw += view.getUint32(at + HEADER_SIZE, true);
        next.stored += header.length;
      }
      return true;
    });
    next.scanned = result.next;
  });
  return next;
}

/** The time of the index's first entry: when the part's first record was written (one small read). */
async function firstIndexTime(driver: QueueDriver, queue: string, part: number): Promise<number | null> {
  const first = await withSharedLog(driver, partIndexPath(queue, part), async (log) => parseIndex(await log.read(0, INDEX_ENTRY_SIZE)).entries[0]);
  return first?.seq === 1 ? first.time : null;
}
