/**
 * Partitioned queues: a queue declared with P partitions is P ordinary queues, `<q>.p0` to
 * `<q>.p<P-1>`, each with the crate's layout, its own writer lock and its own consumers, so
 * that P writers (in as many processes or hosts) append at once and a Rust reader can read any
 * partition as a plain queue. The declaration is one small file, `<q>_info_partitions`, holding
 * `v-queue partitions <P>\n`; the queue `<q>` itself holds no parts. The count never changes:
 * a key's partition is `crc32(key) mod P`, and another P would move keys and break their order.
 */
import { crc32 } from "../format/crc32";
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { sleep } from "../core/sleep";
import { assertName, isValidQueueName } from "../core/names";
import { partitionsPath, queueInfoPath, writerLockPath } from "../storage/paths";
import { writeWhole } from "../storage/write-whole";

/** Most partitions of one queue. */
export const MAX_PARTITIONS = 1024;

const DECLARATION = /^v-queue partitions (\d{1,4})\n/;
const utf8 = new TextEncoder();

/** The name of partition `index` of `queue`: `orders.p3`. */
export const partitionName = (queue: string, index: number): string => `${queue}.p${index}`;

/** The names of all partitions of `queue`, in order. */
export const partitionNames = (queue: string, count: number): string[] => Array.from({ length: count }, (_, i) => partitionName(queue, i));

/** `{ queue, index }` when `name` spells a partition (`orders.p3`), else undefined (whether or not that queue is declared). */
export function parsePartitionName(name: string): { queue: string; index: number } | undefined {
  const match = /^(.+)\.p(0|[1-9]\d{0,3})$/.exec(name);
  if (!match || !isValidQueueName(match[1])) return undefined;
  const index = Number(match[2]);
  return index < MAX_PARTITIONS ? { queue: match[1]!, index } : undefined;
}

/** The partition of a message key: `crc32(utf8(key)) mod count` (bytes are hashed as they are). Stable across processes, hosts and versions. */
export function partitionOfKey(key: string | Uint8Array, count: number): number {
  return crc32(typeof key === "string" ? utf8.encode(key) : key) % count;
}

/** The partition count of `queue`, or undefined when it is not partitioned. */
export async function readPartitions(driver: QueueDriver, queue: string): Promise<number | undefined> {
  const bytes = await driver.readRecord(partitionsPath(queue));
  if (bytes === undefined) return undefined;
  const text = new TextDecoder().decode(bytes);
  const match = DECLARATION.exec(text);
  const count = match ? Number(match[1]) : NaN;
  if (!(count >= 1 && count <= MAX_PARTITIONS)) {
    throw new VQueueError(
      "E_CORRUPT",
      `The partition declaration of queue "${queue}" (${partitionsPath(queue)}) is damaged: ${JSON.stringify(text.slice(0, 60))}; expected "v-queue partitions <1-${MAX_PARTITIONS}>".`,
    );
  }
  return count;
}

/** A partition never written has no queue yet (`E_NOT_FOUND`): nothing in it, not an error (`.catch(neverWritten)`). */
export function neverWritten(error: unknown): undefined {
  if (VQueueError.isError(error) && error.code === "E_NOT_FOUND") return undefined;
  throw error;
}

/** Checks a partition count from outside. */
export function checkPartitionCount(count: unknown, name = "partitions"): asserts count is number {
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1 || count > MAX_PARTITIONS) {
    throw new VQueueError("E_OPTION", `Invalid ${name} ${JSON.stringify(count)}: use a whole number from 1 to ${MAX_PARTITIONS}.`);
  }
}

/**
 * Declares `queue` with `count` partitions (idempotent: the same count again is a no-op). Refused
 * when it is declared with another count, when an ordinary queue of that name exists, or when
 * its partitions' names would be too long. The queue's own writer lock (it never has a writer)
 * keeps two declarations from racing; one that finds it taken waits for the other (instances
 * starting together), up to DECLARE_WAIT_MS.
 */
export async function declarePartitions(driver: QueueDriver, queue: string, count: number, options: { sync?: boolean } = {}): Promise<void> {
  assertName(queue, "queue");
  checkPartitionCount(count);
  if (!isValidQueueName(partitionName(queue, count - 1))) {
    throw new VQueueError(
      "E_NAME",
      `Queue name "${queue}" is too long to be partitioned: its partitions are named "${partitionName(queue, count - 1)}", and a queue name has at most 128 characters.`,
    );
  }
  const lock = await lockToDeclare(driver, queue, count);
  if (!lock) return;
  try {
    if (await refuseExisting(driver, queue, count)) return;
    await writeWhole(driver, partitionsPath(queue), utf8.encode(`v-queue partitions ${count}\n`), options.sync ?? true, lock);
  } finally {
    await lock.release();
  }
}

/** How long a declaration waits while another holds the queue's lock (instances starting together declare at once). */
const DECLARE_WAIT_MS = 5000;

/**
 * The queue's writer lock for a declaration, or undefined when another instance declared the
 * same count meanwhile (its declaration is as good as this one). `E_LOCKED` when the lock stays
 * taken, by a declaration that never ends or by an ordinary queue's writer.
 */
async function lockToDeclare(driver: QueueDriver, queue: string, count: number) {
  for (const until = Date.now() + DECLARE_WAIT_MS; ; await sleep(25)) {
    const lock = await driver.lock(writerLockPath(queue));
    if (lock) return lock;
    if (await refuseExisting(driver, queue, count)) return undefined;
    if (Date.now() >= until)
      throw new VQueueError(
        "E_LOCKED",
        `Cannot declare the partitions of queue "${queue}": it is being declared elsewhere, or it is an ordinary queue with a writer open.`,
      );
  }
}

/** True when `queue` is declared with `count` partitions; `E_OPTION` when it is declared otherwise or is an ordinary queue. */
async function refuseExisting(driver: QueueDriver, queue: string, count: number): Promise<boolean> {
  const declared = await readPartitions(driver, queue);
  if (declared === count) return true;
  if (declared !== undefined) {
    throw new VQueueError(
      "E_OPTION",
      `Queue "${queue}" is declared with ${declared} partitions; it cannot change to ${count} (a key's partition would move, and its order with it).`,
    );
  }
  if ((await driver.readRecord(queueInfoPath(queue))) !== undefined) {
    throw new VQueueError("E_OPTION", `Queue "${queue}" exists as an ordinary queue: it cannot be made partitioned. Use another name.`);
  }
  return false;
}

/**
 * The partition count of `queue` as an open of it needs it: declared first when `partitions` is
 * given (the same count again is fine, another is refused); `E_NOT_FOUND` when it is not declared.
 */
export async function openPartitions(driver: QueueDriver, queue: string, partitions: number | undefined, options: { sync?: boolean } = {}): Promise<number> {
  assertName(queue, "queue");
  if (partitions !== undefined) {
    checkPartitionCount(partitions);
    if ((await readPartitions(driver, queue)) !== partitions) await declarePartitions(driver, queue, partitions, options);
  }
  const count = await readPartitions(driver, queue);
  if (count === undefined) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" is not a partitioned queue: declare it first (option partitions).`);
  return count;
}
