import type { ConsumerPosition } from "./cursor";
import type { QueueDriver } from "./driver";
import { parsePopInfo } from "./info";
import { assertName } from "./names";
import { consumerOfPopFile, popInfoPath, queueOfInfoFile } from "./paths";
import { readPartEnd } from "./position";
import { isWriterGone, listParts, readQueueInfo } from "./recovery";

/** What `inspectQueue` tells about a queue, from its info lines (and its part files once its writer is gone). */
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

/**
 * Names of the queues in the storage (any queue with an info file, the crate's included).
 * Files that are no valid queue's info file are not queues (names.ts).
 */
export async function listQueues(driver: QueueDriver): Promise<string[]> {
  const names: string[] = [];
  for (const entry of await driver.list("")) {
    const name = queueOfInfoFile(entry);
    if (name !== undefined) names.push(name);
  }
  return names.sort();
}

/** Parts, totals and consumers of a queue, or undefined if there is no such queue. */
export async function inspectQueue(driver: QueueDriver, queue: string): Promise<QueueStats | undefined> {
  assertName(queue, "queue");
  const info = await readQueueInfo(driver, queue, ignoreProblems);
  const parts = await readParts(driver, queue, info?.part);
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
  assertName(queue, "queue");
  const counts = parts ?? (await readParts(driver, queue));
  const out: ConsumerStats[] = [];
  for (const entry of await driver.list("")) {
    const name = consumerOfPopFile(queue, entry);
    if (name === undefined) continue;
    const pop = await readPop(driver, queue, name);
    if (!pop) continue; // the crate's empty leftovers, damaged, or not a file
    const position = { part: pop.part, position: pop.position, count: pop.count };
    out.push({ name, ...position, lag: lagAfter(counts, position) });
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
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

/**
 * Every part with its size and record count: from the push info lines while a writer
 * appends, from the part files where nobody does (parts before the current one, and every
 * part once the writer is gone), so messages past a lagging line are counted.
 */
async function readParts(driver: QueueDriver, queue: string, infoPart?: number): Promise<QueueStats["parts"]> {
  const ids = await listParts(driver, queue);
  const current = Math.max(infoPart ?? -1, ids.at(-1) ?? -1);
  const gone = ids.length > 0 && (await isWriterGone(driver, queue));
  const parts: QueueStats["parts"] = [];
  for (const id of ids) {
    const end = await readPartEnd(driver, queue, id, gone || id !== current);
    parts.push({ id, bytes: end.edge, messages: end.count });
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
