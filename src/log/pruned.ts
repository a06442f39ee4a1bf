/**
 * What retention deleted, `B/Q_info_pruned`: a v-queue file (no queue name holds `_info_`,
 * and `pruned` is no consumer's `pop_` file: core/names.ts), so that a consumer whose messages were
 * deleted before it read them is told exactly how many (`MISSED`). The pruner appends an entry
 * per part *before* it deletes the part.
 *
 * Format: append-only, fixed-size entries of 32 bytes, little-endian:
 *   0..8 u64 part id, 8..16 u64 messages in it, 16..24 u64 bytes, 24..28 zero, 28..32 CRC-32 of 0..28.
 * A torn or damaged entry ends the reading. Bounded: past `MAX_ENTRIES` the file keeps the
 * newest half (a consumer behind all of those is told "at least"). That compaction writes the
 * half it keeps to a copy, `B/Q_info_pruned_new`, whole and durable, before it cuts the file;
 * readers count the copy's entries too, and the next record (the next retention round) writes
 * back what the file lacks, a compaction a crash cut short included, and only then removes the
 * copy: a reader that saw the file cut sees the copy on its second look, unless a whole round
 * passed in between. No entry is lost.
 */
import { crc32Range } from "../format/crc32";
import type { ConsumerPosition } from "../format/position";
import type { DriverLock, LogFile, QueueDriver } from "../core/driver";
import { openFencedLog } from "../storage/fence";
import { withSharedLog } from "../storage/handles";
import { prunedPath, sideJournalPath } from "../storage/paths";

const ENTRY = 32;
const MAX_ENTRIES = 65_536;

export interface PrunedPart {
  part: number;
  messages: number;
  bytes: number;
}

function encode(parts: readonly PrunedPart[]): Uint8Array {
  const buf = new Uint8Array(parts.length * ENTRY);
  const view = new DataView(buf.buffer);
  parts.forEach((p, i) => {
    const at = i * ENTRY;
    view.setBigUint64(at, BigInt(p.part), true);
    view.setBigUint64(at + 8, BigInt(p.messages), true);
    view.setBigUint64(at + 16, BigInt(p.bytes), true);
    view.setUint32(at + 28, crc32Range(buf, at, at + 28), true);
  });
  return buf;
}

function decode(bytes: Uint8Array): PrunedPart[] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: PrunedPart[] = [];
  for (let at = 0; at + ENTRY <= bytes.length; at += ENTRY) {
    if (view.getUint32(at + 28, true) !== crc32Range(bytes, at, at + 28)) break;
    out.push({ part: Number(view.getBigUint64(at, true)), messages: Number(view.getBigUint64(at + 8, true)), bytes: Number(view.getBigUint64(at + 16, true)) });
  }
  return out;
}

const readEntries = async (driver: QueueDriver, path: string): Promise<PrunedPart[]> =>
  (await withSharedLog(driver, path, async (log) => decode(await log.read(0, await log.size())))) ?? [];

/**
 * Parts retention deleted, by id (an id recorded twice, by two pruners at once, counts once).
 * The compaction's copy is read before and after the file: one cut meanwhile is seen in either.
 */
export async function readPruned(driver: QueueDriver, queue: string): Promise<Map<number, PrunedPart>> {
  const copy = sideJournalPath(prunedPath(queue));
  const parts = [...(await readEntries(driver, copy)), ...(await readEntries(driver, prunedPath(queue))), ...(await readEntries(driver, copy))];
  return new Map(parts.map((p) => [p.part, p]));
}

/** The file's content replaced by `parts`, durably. */
async function rewrite(log: LogFile, parts: readonly PrunedPart[]): Promise<number> {
  await log.truncate(0);
  await log.append(0, encode(parts));
  await log.sync();
  return parts.length * ENTRY;
}

/** Records parts about to be deleted (call before deleting them); `fence`: the lock of the writer whose retention this is. */
export async function recordPruned(driver: QueueDriver, queue: string, parts: readonly PrunedPart[], fence?: DriverLock): Promise<void> {
  const log = await openFencedLog(driver, prunedPath(queue), fence);
  try {
    let size = await log.size();
    const whole = size - (size % ENTRY);
    if (whole !== size) await log.truncate((size = whole)); // a torn entry: cut off, as the part files' tails are
    const copyPath = sideJournalPath(prunedPath(queue));
    const copy = await readEntries(driver, copyPath);
    if (copy.length > 0) {
      // A compaction cut short: the file holds all it had (not cut yet) or a part of the copy.
      const held = decode(await log.read(0, size));
      const known = new Set(held.map((p) => p.part));
      const missing = copy.filter((p) => !known.has(p.part));
      if (missing.length > 0) size = await rewrite(log, [...held, ...missing]);
      // (An empty copy, cut before its first entry, is left: the next compaction writes over it.)
      await driver.remove(copyPath, fence);
    }
    if (size / ENTRY + parts.length > MAX_ENTRIES) {
      const kept = decode(await log.read(0, size)).slice(-MAX_ENTRIES / 2);
      const copyLog = await openFencedLog(driver, copyPath, fence);
      try {
        await rewrite(copyLog, kept);
      } finally {
        await copyLog.close();
      }
      await driver.syncDir?.("");
      size = await rewrite(log, kept);
      // The copy stays until the next round: a reader between its two looks at it still finds it.
    }
    await log.append(size, encode(parts));
    // Durable before any part goes: a deletion that outlives a power cut without its record
    // would turn a consumer's exact MISSED count into a BAD_POSITION. One fsync per round.
    await log.sync();
  } finally {
    await log.close();
  }
}

/**
 * Messages a consumer at `from` missed by going on at part `to` (the oldest part left after
 * its own): the rest of its part, if that was deleted, and every deleted part in between.
 * `exact` is false when a part in between is in no record (older than the record keeps).
 */
export function missedBetween(pruned: Map<number, PrunedPart>, from: ConsumerPosition, to: number): { missed: number; exact: boolean } {
  let missed = 0;
  const own = pruned.get(from.part);
  if (own) missed += Math.max(0, own.messages - from.count);
  let known = 0;
  for (const p of pruned.values()) {
    if (p.part <= from.part || p.part >= to) continue;
    missed += p.messages;
    known++;
  }
  return { missed, exact: known === Math.max(0, to - from.part - 1) };
}
