import { consumerLag } from "./consumer";
import type { ConsumerPosition } from "./cursor";
import type { QueueDriver } from "./driver";
import { parsePopInfo } from "./info";
import { assertName, isValidName } from "./names";
import { consumerOfPopFile, popInfoPath } from "./paths";
import { listParts, readPushInfo, readQueueInfo } from "./recovery";

/** What `inspectQueue` tells about a queue, from its info lines (no part is scanned). */
export interface QueueStats {
  name: string;
  /** The writer's current part. */
  currentPart: number;
  /** Records in the current part. */
  currentCount: number;
  parts: { id: number; bytes: number; messages: number }[];
  messages: number;
  bytes: number;
  consumers: ConsumerStats[];
}

export interface ConsumerStats extends ConsumerPosition {
  name: string;
  /** Messages pushed and not yet committed by this consumer. */
  lag: number;
}

const decoder = new TextDecoder();
const ignoreProblems = () => {};

/** Names of the queues in the storage (any queue with an info file, the crate's included). */
export async function listQueues(driver: QueueDriver): Promise<string[]> {
  const names: string[] = [];
  for (const entry of await driver.list("")) {
    if (!entry.endsWith("_info_queue")) continue;
    const name = entry.slice(0, -"_info_queue".length);
    if (isValidName(name)) names.push(name);
  }
  return names.sort();
}

/** Parts, totals and consumers of a queue, or undefined if there is no such queue. */
export async function inspectQueue(driver: QueueDriver, queue: string): Promise<QueueStats | undefined> {
  assertName(queue, "queue");
  const ids = await listParts(driver, queue);
  const info = await readQueueInfo(driver, queue, ignoreProblems);
  if (!info && ids.length === 0) return undefined;
  const parts: QueueStats["parts"] = [];
  for (const id of ids) {
    const push = await readPushInfo(driver, queue, id);
    parts.push({ id, bytes: push?.edge ?? 0, messages: push?.count ?? 0 });
  }
  const currentPart = Math.max(info?.part ?? 0, ids.at(-1) ?? 0);
  return {
    name: queue,
    currentPart,
    currentCount: parts.find((p) => p.id === currentPart)?.messages ?? 0,
    parts,
    messages: parts.reduce((sum, p) => sum + p.messages, 0),
    bytes: parts.reduce((sum, p) => sum + p.bytes, 0),
    consumers: await listConsumers(driver, queue),
  };
}

/** The consumers of a queue with their saved positions and lag. */
export async function listConsumers(driver: QueueDriver, queue: string): Promise<ConsumerStats[]> {
  const out: ConsumerStats[] = [];
  for (const entry of await driver.list("")) {
    const name = consumerOfPopFile(queue, entry);
    if (name === undefined || !isValidName(name)) continue;
    const bytes = await driver.readFile(popInfoPath(queue, name));
    const pop = bytes && parsePopInfo(decoder.decode(bytes), queue, name);
    if (!pop) continue; // the crate's empty leftovers, or damaged
    const position = { part: pop.part, position: pop.position, count: pop.count };
    out.push({ name, ...position, lag: await consumerLag(driver, queue, position) });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}
