import type { ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { sharedFileStats } from "./shared";
import type { ConsumerStats, QueueStats } from "./types";
import { parsePopInfo } from "../format/info";
import { assertName } from "../core/names";
import { declaredPartitioned, parentOf, partitionedStats } from "./partitioned";
import { partitionNames, readPartitions } from "../partitions/declaration";
import { consumerOfPopFile, popInfoPath, queueOfInfoFile } from "../storage/paths";
import { SharedState } from "../consumers/state/shared-state";
import { queueTotals, type PartTotals } from "../log/totals";

const decoder = new TextDecoder();

/**
 * Names of the queues in the storage (any queue with an info file, the crate's included).
 * Files that are no valid queue's info file are not queues (core/names.ts).
 */
export async function listQueues(driver: QueueDriver): Promise<string[]> {
  const entries = await driver.list("");
  const declared = await declaredPartitioned(driver, entries);
  const names: string[] = [...declared.keys()];
  for (const entry of entries) {
    const name = queueOfInfoFile(entry);
    // A declared queue's partitions are listed under it (inspectQueue), not beside it.
    if (name !== undefined && parentOf(name, declared) === undefined) names.push(name);
  }
  return names.sort();
}

/** Parts, totals and consumers of a queue, or undefined if there is no such queue. A partitioned queue: per partition, and summed. */
export async function inspectQueue(driver: QueueDriver, queue: string): Promise<QueueStats | undefined> {
  assertName(queue, "queue");
  const partitions = await readPartitions(driver, queue);
  if (partitions !== undefined) {
    const rows = await Promise.all(partitionNames(queue, partitions).map((name) => inspectQueue(driver, name)));
    return partitionedStats(queue, partitions, rows);
  }
  const totals = await queueTotals(driver, queue);
  if (!totals) return undefined;
  return {
    name: queue,
    currentPart: totals.currentPart,
    currentCount: totals.currentCount,
    parts: totals.parts(),
    messages: totals.messages,
    bytes: totals.bytes,
    consumers: await consumersOf(driver, queue, totals.lagAfter, totals.parts()),
  };
}

/** Messages pushed after `position`, from the queue's running totals (log/totals.ts). */
export async function consumerLag(driver: QueueDriver, queue: string, position: ConsumerPosition): Promise<number> {
  return (await queueTotals(driver, queue))?.lagAfter(position) ?? 0;
}

/** The consumers of a queue with their saved positions and lag (counted in `parts` if given). */
export async function listConsumers(driver: QueueDriver, queue: string, parts?: QueueStats["parts"]): Promise<ConsumerStats[]> {
  assertName(queue, "queue");
  const totals = parts ? undefined : await queueTotals(driver, queue);
  return consumersOf(driver, queue, (position) => (parts ? lagAfter(parts, position) : (totals?.lagAfter(position) ?? 0)), parts ?? totals?.parts() ?? []);
}

// --- Internal helpers ---

/**
 * A consumer's saved position, or undefined. Listing shows what is there: an entry that
 * cannot be read as a position file (a directory of some other program's, say) is skipped.
 */
async function readPop(driver: QueueDriver, queue: string, name: string) {
  try {
    const bytes = await driver.readRecord(popInfoPath(queue, name));
    return bytes && parsePopInfo(decoder.decode(bytes), queue, name);
  } catch {
    return undefined;
  }
}

/** The consumers' saved positions, each with its kind and its lag as `lag` counts it (less a shared one's acks above its floor). */
async function consumersOf(driver: QueueDriver, queue: string, lag: (position: ConsumerPosition) => number, parts: PartTotals[]): Promise<ConsumerStats[]> {
  const out: ConsumerStats[] = [];
  for (const entry of await driver.list("")) {
    const name = consumerOfPopFile(queue, entry);
    if (name === undefined) continue;
    const pop = await readPop(driver, queue, name);
    if (!pop) continue; // the crate's empty leftovers, damaged, or not a file
    const position = { part: pop.part, position: pop.position, count: pop.count };
    if (!(await SharedState.exists(driver, queue, name))) {
      out.push({ name, ...position, kind: "ordered", lag: lag(position) });
      continue;
    }
    const shared = await sharedFileStats(driver, queue, name, position, parts);
    out.push({ name, ...position, kind: "shared", lag: Math.max(0, lag(position) - shared.ackedAboveFloor), shared });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

function lagAfter(parts: QueueStats["parts"], position: ConsumerPosition): number {
  let lag = 0;
  for (const part of parts) {
    if (part.id === position.part) lag += Math.max(0, part.messages - position.count);
    else if (part.id > position.part) lag += part.messages;
  }
  return lag;
}
