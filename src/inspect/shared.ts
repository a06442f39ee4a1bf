import { comparePositions, type ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import type { PartTotals } from "../log/totals";
import { isBelow, messageKey, SharedState, startsBelow, type AckRange } from "../consumers/state/shared-state";

/**
 * What the files of a shared consumer tell (`inspectQueue`): its state above the floor as last
 * written (snapshot and journal, consumers/state/shared-state.ts). Leases are in the memory of the process that
 * holds the consumer: how many run now only that process knows (`SharedConsumer.stats`).
 */
export interface SharedFileStats {
  /** Acknowledged out of order, above the floor. */
  ackedAboveFloor: number;
  /** Handed out at least once and not acknowledged: leased now, or coming again. */
  pending: number;
  /** Of those, handed out more than once. */
  redelivered: number;
  /** The highest delivery count of a pending message (0 when none). */
  maxDeliveries: number;
  /** Messages moved to the dead-letter queue since the consumer was created. */
  deadLettered: number;
  /** The oldest message not acknowledged (the one at the floor), or null when all are. */
  oldestUnacked: { part: number; offset: number; seq: number; deliveries: number } | null;
}

/** Reads a shared consumer's state files; `lagAfterFloor` is what the floor alone leaves (the ordered lag). */
export async function sharedFileStats(
  driver: QueueDriver,
  queue: string,
  name: string,
  floor: ConsumerPosition,
  parts: PartTotals[],
): Promise<SharedFileStats> {
  // Damaged lines are skipped: an inspection reports what it can read (the consumer reports them when it opens).
  const state = await new SharedState(driver, queue, name, false).load(() => {});
  const ranges = state.ranges.all.filter((range) => !startsBelow(range.part, range.to, floor));
  const acked = (key: string) => state.acked.has(key) || inRanges(key, ranges);
  const mark = state.mark;
  let ackedAboveFloor = 0;
  let ackedBelowMark = 0;
  for (const key of state.acked) {
    if (isBelow(key, floor) || inRanges(key, ranges)) continue;
    ackedAboveFloor++;
    if (mark && isBelow(key, mark)) ackedBelowMark++;
  }
  for (const range of ranges) {
    ackedAboveFloor += range.count;
    if (startsBelow(range.part, range.to, mark)) ackedBelowMark += range.count;
  }
  let pending = 0;
  let redelivered = 0;
  let maxDeliveries = 0;
  // Below the mark, a message with no count of its own was handed out once.
  let once = mark ? messagesBetween(floor, mark, parts) - ackedBelowMark : 0;
  for (const [key, count] of state.deliveries) {
    if (isBelow(key, floor) || acked(key)) continue;
    // Below the mark with a count of 0: passed by the mark, never handed out.
    if (mark && isBelow(key, mark)) once--;
    if (count < 1) continue;
    pending++;
    if (count > 1) redelivered++;
    maxDeliveries = Math.max(maxDeliveries, count);
  }
  if (once > 0) {
    pending += once;
    maxDeliveries = Math.max(maxDeliveries, 1);
  }
  const oldest = firstAfter(floor, parts);
  return {
    ackedAboveFloor,
    pending,
    redelivered,
    maxDeliveries,
    deadLettered: state.deadLettered,
    oldestUnacked: oldest
      ? { ...oldest, deliveries: state.deliveries.get(messageKey(oldest.part, oldest.offset)) ?? (startsBelow(oldest.part, oldest.offset, mark) ? 1 : 0) }
      : null,
  };
}

function inRanges(key: string, ranges: readonly AckRange[]): boolean {
  const [part, offset] = key.split(".").map(Number) as [number, number];
  return ranges.some((range) => range.part === part && range.from <= offset && offset <= range.to);
}

/** Messages from `from` to `to` (positions; seqs count from 1 in each part). */
function messagesBetween(from: ConsumerPosition, to: ConsumerPosition, parts: PartTotals[]): number {
  if (comparePositions(to, from) <= 0) return 0;
  if (from.part === to.part) return to.count - from.count;
  let count = to.count;
  for (const part of parts) {
    if (part.id === from.part) count += Math.max(0, part.messages - from.count);
    else if (part.id > from.part && part.id < to.part) count += part.messages;
  }
  return count;
}

/** The first message after `position` (seqs count from 1 in each part, a part's first record is at 0), or undefined. */
function firstAfter(position: ConsumerPosition, parts: PartTotals[]): { part: number; offset: number; seq: number } | undefined {
  for (const part of parts) {
    if (part.id === position.part && part.messages > position.count) return { part: part.id, offset: position.position, seq: position.count + 1 };
    if (part.id > position.part && part.messages > 0) return { part: part.id, offset: 0, seq: 1 };
  }
  return undefined;
}
