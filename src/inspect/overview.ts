import type { ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { isValidConsumerName } from "../core/names";
import { declaredPartitioned, parentOf, partitionedOverview } from "./partitioned";
import type { ConsumerOverview, QueueOverview } from "./types";
import { queueOfInfoFile } from "../storage/paths";
import { readPosition } from "../consumers/state/position-file";
import { queueTotals } from "../log/totals";

/**
 * Every queue of a storage at once, for the dashboard, the metrics and `stat --watch`: one
 * listing of the base directory tells the queues, their parts and their consumers (and which
 * are shared), then each queue costs its info lines and each consumer its position file. No
 * part file is read but the sealed parts the running totals have not measured yet (once per
 * process: log/totals.ts). `inspectQueue` lists the storage per queue, which 1,000 queues cannot afford.
 */

export interface OverviewOptions {
  /** Only these queues (the others are not read at all). */
  include?: (queue: string) => boolean;
  /**
   * A consumer's position without reading its file (the process holds it open), or undefined
   * to read the file.
   */
  livePosition?: (queue: string, consumer: string) => ConsumerPosition | undefined;
  /** Reads in flight at once: round trips overlap on a driver over a network. @default 16 */
  concurrency?: number;
}

/** What one listing of the base directory says about one queue. */
export interface ListedQueue {
  parts: number[];
  consumers: string[];
  shared: Set<string>;
}

const POP = "_info_pop_";
const SHARED = "_info_shared_";

/** Every queue of the storage (those `include` lets through), by name. */
export async function storageOverview(driver: QueueDriver, options: OverviewOptions = {}): Promise<QueueOverview[]> {
  const { include } = options;
  const entries = await driver.list("");
  const declared = await declaredPartitioned(driver, entries, include);
  // A partition goes with its queue: included when that queue is.
  const listed = groupEntries(entries, include && ((queue) => include(queue) || parentOf(queue, declared) !== undefined));
  const names = [...listed.keys()].sort();
  const out: (QueueOverview | undefined)[] = Array.from({ length: names.length });
  await forEachLimited(names.length, options.concurrency ?? 16, async (i) => {
    out[i] = await queueOverview(driver, names[i]!, listed.get(names[i]!)!, options.livePosition);
  });
  const found = out.filter((queue): queue is QueueOverview => queue !== undefined);
  const partitionsOf = new Map<string, QueueOverview[]>([...declared.keys()].map((queue) => [queue, []]));
  const top = found.filter((queue) => {
    const parent = parentOf(queue.name, declared);
    if (parent !== undefined) partitionsOf.get(parent)!.push(queue);
    return parent === undefined;
  });
  for (const [queue, partitions] of partitionsOf) top.push(partitionedOverview(queue, declared.get(queue)!, partitions));
  return top.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** One listing of the base directory, sorted by queue: part directories, position files, shared markers. */
export async function listStorage(driver: QueueDriver, include?: (queue: string) => boolean): Promise<Map<string, ListedQueue>> {
  return groupEntries(await driver.list(""), include);
}

function groupEntries(entries: string[], include: ((queue: string) => boolean) | undefined): Map<string, ListedQueue> {
  const queues = new Map<string, ListedQueue>();
  for (const entry of entries) {
    const name = queueOfInfoFile(entry);
    if (name !== undefined && (!include || include(name))) queues.set(name, { parts: [], consumers: [], shared: new Set() });
  }
  for (const entry of entries) {
    // No queue name holds `_info_` (core/names.ts): the first one ends the queue's name.
    const info = entry.indexOf("_info_");
    if (info > 0) {
      const owner = entry.slice(0, info);
      const queue = queues.get(owner);
      const rest = entry.slice(info);
      const consumer = (prefix: string) =>
        rest.startsWith(prefix) && isValidConsumerName(rest.slice(prefix.length), owner) ? rest.slice(prefix.length) : undefined;
      const pop = consumer(POP);
      const shared = consumer(SHARED);
      if (queue && pop !== undefined) queue.consumers.push(pop);
      if (queue && shared !== undefined) queue.shared.add(shared);
      continue;
    }
    const dash = entry.lastIndexOf("-");
    if (dash <= 0) continue;
    const queue = queues.get(entry.slice(0, dash));
    const id = entry.slice(dash + 1);
    if (queue && /^\d{1,15}$/.test(id)) queue.parts.push(Number(id));
  }
  for (const queue of queues.values()) queue.parts.sort((a, b) => a - b);
  return queues;
}

/** One queue of a listing (`listStorage`): its totals and consumers now, or undefined when it is gone. */
export async function queueOverview(
  driver: QueueDriver,
  name: string,
  listed: ListedQueue,
  livePosition: OverviewOptions["livePosition"],
): Promise<QueueOverview | undefined> {
  const totals = await queueTotals(driver, name, listed.parts).catch(() => undefined);
  if (!totals) return undefined; // deleted since the listing, or unreadable: not shown
  const consumers: ConsumerOverview[] = [];
  for (const consumer of listed.consumers.sort()) {
    const position = livePosition?.(name, consumer) ?? (await readPosition(driver, name, consumer));
    if (!position) continue; // the crate's empty leftovers, damaged, or not a file
    consumers.push({
      name: consumer,
      ...position,
      kind: listed.shared.has(consumer) ? "shared" : "ordered",
      lag: totals.lagAfter(position),
      lagBytes: totals.bytesAfter(position),
    });
  }
  return { name, totals, consumers };
}

/** Runs `task(0..count-1)`, at most `limit` at once. */
export async function forEachLimited(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane));
}
