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
  const parts = await readParts(driver, queue);
  const info = await readQueueInfo(driver, queue, ignoreProblems);
  if (!info && parts.length === 0) return undefined;
  const currentPart = Math.max(info?.part ?? 0, parts.at(-1)?.id ?? 0);
  return {
    name: queue,
    currentPart,
    currentCount: parts.find((p) => p.id === currentPart)?.messages ?? 0,
    parts,
    messages: parts.reduce((sum, p) => sum + p.messages, 0),
    bytes: parts.reduce((sum, p) => sum + p.bytes, 0),
    consumers: await listConsumers(driver, queue, parts),
  };
}

/** Messages pushed after `position`, counted from the push info lines of the parts. */
export async function consumerLag(driver: QueueDriver, queue: string, position: ConsumerPosition): Promise<number> {
  return lagAfter(await readParts(driver, queue), position);
}

/** The consumers of a queue with their saved positions and lag (`parts` if already read). */
export async function listConsumers(driver: QueueDriver, queue: string, parts?: QueueStats["parts"]): Promise<ConsumerStats[]> {
  const counts = parts ?? (await readParts(driver, queue));
  const out: ConsumerStats[] = [];
  for (const entry of await driver.list("")) {
    const name = consumerOfPopFile(queue, entry);
    if (name === undefined || !isValidName(name)) continue;
    const bytes = await driver.readFile(popInfoPath(queue, name));
    const pop = bytes && parsePopInfo(decoder.decode(bytes), queue, name);
    if (!pop) continue; // the crate's empty leftovers, or damaged
    const position = { part: pop.part, position: pop.position, count: pop.count };
    out.push({ name, ...position, lag: lagAfter(counts, position) });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

// --- Internal helpers ---

/** Every part with its size and record count, from the push info lines (read once per call). */
async function readParts(driver: QueueDriver, queue: string): Promise<QueueStats["parts"]> {
  const parts: QueueStats["parts"] = [];
  for (const id of await listParts(driver, queue)) {
    const push = await readPushInfo(driver, queue, id);
    parts.push({ id, bytes: push?.edge ?? 0, messages: push?.count ?? 0 });
  }
  return parts;
}

function lagAfter(parts: QueueStats["parts"], position: ConsumerPosition): number {
  let lag = 0;
  for (const part of parts) {
    if (part.id === position.part) lag += Math.max(0, part.messages - position.count);
    else if (part.id > position.part) lag += part.messages;
  }
  return lag;
}
