/**
 * A partitioned queue in the monitor's snapshot: its partitions (`orders.p0`...) are sampled as
 * the ordinary queues they are, and folded here into one row for the queue, with `partitions`
 * and totals, rates and consumers summed over them. The partition rows stay (marked
 * `partitionOf`): the metrics label them by partition, the queue's detail lists them.
 */
import type { HistoryJSON } from "../protocol/api";
import { parsePartitionName, partitionNames } from "../src/partitions/declaration";
import type { ConsumerSample, QueueSample } from "./types";

/** The queues of a sample with a row added per partitioned queue (`count` says which names are declared partitioned). */
export async function foldPartitions(queues: QueueSample[], count: (queue: string) => Promise<number | undefined>): Promise<QueueSample[]> {
  const groups = new Map<string, QueueSample[]>();
  for (const q of queues) {
    const parsed = parsePartitionName(q.name);
    if (!parsed) continue;
    const partitions = await count(parsed.queue).catch(() => undefined);
    if (partitions === undefined || parsed.index >= partitions) continue;
    q.partitionOf = { queue: parsed.queue, partition: parsed.index, partitions };
    let group = groups.get(parsed.queue);
    if (!group) groups.set(parsed.queue, (group = []));
    group.push(q);
  }
  if (groups.size === 0) return queues;
  const parents = [...groups].map(([name, rows]) => sumSamples(name, rows[0]!.partitionOf!.partitions, rows));
  return [...queues, ...parents].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The names a queue's row was sampled under: its own, or a partitioned queue's partitions (`orders.p0`...). */
export function sampledTracks(sample: QueueSample): string[] {
  return sample.partitions === undefined ? [sample.name] : partitionNames(sample.name, sample.partitions);
}

/** One row for a partitioned queue: sums over its partitions; no part of its own (`currentPart` 0). */
function sumSamples(name: string, partitions: number, rows: QueueSample[]): QueueSample {
  const sum = (pick: (q: QueueSample) => number) => rows.reduce((total, q) => total + pick(q), 0);
  const consumers = sumConsumers(rows.flatMap((q) => q.consumers));
  const worst = consumers.reduce<ConsumerSample | undefined>((w, c) => (!w || c.lag > w.lag ? c : w), undefined);
  return {
    name,
    partitions,
    messages: sum((q) => q.messages),
    bytes: sum((q) => q.bytes),
    parts: sum((q) => q.parts),
    currentPart: 0,
    producedTotal: sum((q) => q.producedTotal),
    producedBytesTotal: sum((q) => q.producedBytesTotal),
    produceRate: sum((q) => q.produceRate),
    consumeRate: sum((q) => q.consumeRate),
    consumedTotal: sum((q) => q.consumedTotal),
    maxLag: worst?.lag ?? 0,
    maxLagConsumer: worst?.name ?? null,
    consumers,
  };
}

/** A consumer name over the partitions: lag, totals and rate summed; its position is per partition (0 here). */
function sumConsumers(all: ConsumerSample[]): ConsumerSample[] {
  const byName = new Map<string, ConsumerSample>();
  for (const c of all) {
    const seen = byName.get(c.name);
    if (!seen) {
      byName.set(c.name, { ...c, part: 0, position: 0, count: 0, shared: c.shared && { ...c.shared, oldestUnacked: null } });
      continue;
    }
    seen.lag += c.lag;
    seen.lagBytes += c.lagBytes;
    seen.consumedTotal += c.consumedTotal;
    seen.consumedBytesTotal += c.consumedBytesTotal;
    seen.rate += c.rate;
    seen.lastSeen = Math.max(seen.lastSeen ?? 0, c.lastSeen ?? 0) || null;
    if (seen.shared && c.shared) {
      seen.shared.inFlight += c.shared.inFlight;
      seen.shared.redelivered += c.shared.redelivered;
      seen.shared.deadLettered += c.shared.deadLettered;
    }
  }
  return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
}

/** The partitions' histories summed point by point, newest aligned (a partition sampled fewer times adds to the newest points only). */
export function sumHistories(histories: (HistoryJSON | undefined)[]): HistoryJSON | undefined {
  const present = histories.filter((h): h is HistoryJSON => h !== undefined && h.t.length > 0);
  if (present.length === 0) return undefined;
  const longest = present.reduce((a, b) => (b.t.length > a.t.length ? b : a));
  const out: HistoryJSON = { t: [...longest.t] };
  for (const key of ["produce", "consume", "lag"] as const) {
    if (!present.some((h) => h[key])) continue;
    const values = new Array<number>(out.t.length).fill(0);
    for (const h of present) {
      const series = h[key] ?? [];
      const shift = out.t.length - series.length;
      series.forEach((v, i) => (values[shift + i]! += v));
    }
    out[key] = values;
  }
  return out;
}
