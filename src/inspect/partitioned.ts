/**
 * A partitioned queue in listings (inspect/queues.ts, inspect/overview.ts): shown as itself, with `partitions`
 * (its count) and `partitionQueues` (each partition's own stats or overview, as an ordinary
 * queue's), its totals and its consumers' lag summed over them. Its partitions are not listed
 * again at the top (they are reachable by name, `orders.p3`, as any queue). A sum has no single
 * part or position: those fields are 0 at the top, and per partition below.
 */
import type { QueueDriver } from "../core/driver";
import type { ConsumerOverview, ConsumerStats, QueueOverview, QueueStats } from "./types";
import { parsePartitionName, readPartitions } from "../partitions/declaration";
import { queueOfPartitionsFile } from "../storage/paths";
import type { QueueTotals } from "../log/totals";

/** The partitioned queues of a listing of the base directory, with their partition counts (damaged declarations left out). */
export async function declaredPartitioned(driver: QueueDriver, entries: string[], include?: (queue: string) => boolean): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const entry of entries) {
    const queue = queueOfPartitionsFile(entry);
    if (queue === undefined || (include && !include(queue))) continue;
    const count = await readPartitions(driver, queue).catch(() => undefined);
    if (count !== undefined) out.set(queue, count);
  }
  return out;
}

/** The partitioned queue `name` belongs to as a partition, if it is one of a declared queue. */
export function parentOf(name: string, declared: Map<string, number>): string | undefined {
  const parsed = parsePartitionName(name);
  return parsed && parsed.index < (declared.get(parsed.queue) ?? 0) ? parsed.queue : undefined;
}

/** Totals summed over partitions: no parts of its own, no position to count lag from. */
function sumTotals(all: QueueTotals[]): QueueTotals {
  const sum = (pick: (t: QueueTotals) => number) => all.reduce((total, t) => total + pick(t), 0);
  return {
    currentPart: 0,
    currentCount: sum((t) => t.currentCount),
    currentEdge: sum((t) => t.currentEdge),
    messages: sum((t) => t.messages),
    bytes: sum((t) => t.bytes),
    partCount: sum((t) => t.partCount),
    parts: () => [],
    lagAfter: () => 0,
    bytesAfter: () => 0,
  };
}

/** One row per consumer name over the partitions: its lag (and lag in bytes) summed; the positions are the partitions'. */
function sumConsumers<C extends { name: string; lag: number; lagBytes?: number }>(rows: C[][], make: (first: C) => C): C[] {
  const byName = new Map<string, C>();
  for (const row of rows.flat()) {
    const seen = byName.get(row.name);
    if (!seen) byName.set(row.name, { ...make(row), lag: row.lag, ...(row.lagBytes === undefined ? {} : { lagBytes: row.lagBytes }) });
    else {
      seen.lag += row.lag;
      if (seen.lagBytes !== undefined) seen.lagBytes += row.lagBytes ?? 0;
    }
  }
  return [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
}

const noPosition = { part: 0, position: 0, count: 0 };

/** A partitioned queue's overview from its partitions'. */
export function partitionedOverview(name: string, partitions: number, queues: QueueOverview[]): QueueOverview {
  return {
    name,
    totals: sumTotals(queues.map((q) => q.totals)),
    consumers: sumConsumers<ConsumerOverview>(
      queues.map((q) => q.consumers),
      (c) => ({ ...c, ...noPosition }),
    ),
    partitions,
    partitionQueues: queues,
  };
}

/** A partitioned queue's stats from its partitions' (undefined for a partition never written). */
export function partitionedStats(name: string, partitions: number, queues: (QueueStats | undefined)[]): QueueStats {
  const present = queues.filter((q): q is QueueStats => q !== undefined);
  return {
    name,
    currentPart: 0,
    currentCount: present.reduce((sum, q) => sum + q.currentCount, 0),
    parts: [],
    messages: present.reduce((sum, q) => sum + q.messages, 0),
    bytes: present.reduce((sum, q) => sum + q.bytes, 0),
    consumers: sumConsumers<ConsumerStats>(
      present.map((q) => q.consumers),
      ({ shared: _, ...c }) => ({ ...c, ...noPosition }),
    ),
    partitions,
    partitionQueues: present,
  };
}
