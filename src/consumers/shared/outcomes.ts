/**
 * Following a shared consumer's outcomes (docs/work-queues.md#outcomes): `followOutcomes` streams
 * them, `waitForOutcome` waits for one message's end. Both read the consumer's outcome logs
 * (outcome-reader.ts), one per partition of a partitioned queue, in any process and without the
 * consumer's lock: an instance that does not hold the consumer follows it as well as its holder.
 * A reader in the process that writes the log is woken at each write (outcome-wake.ts); one in
 * another process looks every `pollIntervalMs`.
 */
import type { QueueDriver } from "../../core/driver";
import { VQueueError } from "../../core/errors";
import { assertName } from "../../core/names";
import { checkDriver, checkInteger } from "../../options/queue";
import { checkOption } from "../../core/check";
import { isEnd, type StoredOutcome } from "../../format/outcome";
import { partitionName, readPartitions } from "../../partitions/declaration";
import { sharedOutcomesPath } from "../../storage/paths";
import type { OutcomeEvent } from "../types";
import { OutcomeFileReader } from "./outcome-reader";
import { OutcomeIndex } from "./outcome-index";
import { onOutcomes, outcomeWakeKey } from "./outcome-wake";

/** How often a partitioned queue's declaration is read again while following it (partitions added meanwhile). */
const PARTITIONS_RECHECK_MS = 2000;
const DEFAULT_POLL_MS = 100;

export interface FollowOutcomesOptions {
  /** The storage (on Node, `v-queue` makes the fs driver on `dir` when none is given). */
  driver: QueueDriver;
  /** Where to start: events written from now on, or every event the log still keeps. @default "now" */
  from?: "now" | "oldest";
  /** Resume after this event's `cursor` (wins over `from`). */
  after?: string;
  signal?: AbortSignal;
  /** How often to look for events written by another process. @default the driver's, else 100 */
  pollIntervalMs?: number;
}

export interface WaitForOutcomeOptions {
  /** The storage (on Node, `v-queue` makes the fs driver on `dir` when none is given). */
  driver: QueueDriver;
  /** Give up after this long (undefined is answered then). @default no limit */
  timeoutMs?: number;
  signal?: AbortSignal;
  pollIntervalMs?: number;
}

/** The message whose end `waitForOutcome` waits for: its position, and on a partitioned queue its partition. */
export interface OutcomeMessage {
  part: number;
  offset: number;
  partition?: number;
}

/** One log being followed: a queue's, or one partition's. */
interface Source {
  partition: number | undefined;
  reader: OutcomeFileReader;
  stopWake: () => void;
}

/**
 * The outcome events of shared consumer `consumer` of `queue`, as they are written, oldest
 * first (on a partitioned queue, each partition's in order): `completed` (with the ack's
 * result), `failed` (with the error and when it comes again), `dead` (dead-lettered),
 * `progress`. Each event's `cursor`, given back as `after`, resumes after it. Ends when `signal`
 * aborts (after the events of the look under way: a signal aborted already gives the events there
 * now and ends), or when the caller stops iterating.
 */
export async function* followOutcomes(queue: string, consumer: string, options: FollowOutcomesOptions): AsyncGenerator<OutcomeEvent, void, undefined> {
  assertName(queue, "queue");
  assertName(consumer, "consumer", queue);
  checkOption("driver", options?.driver, checkDriver);
  const { driver, from = "now", after, signal } = options;
  if (from !== "now" && from !== "oldest") throw new VQueueError("E_OPTION", `Invalid from ${JSON.stringify(from)}: use "now" or "oldest".`);
  const pollMs = pollInterval(driver, options.pollIntervalMs);
  const partitioned = (await readPartitions(driver, queue)) !== undefined;
  const start = after === undefined ? undefined : parseOutcomeCursor(after, partitioned);
  const sources = new Map<number | undefined, Source>();
  let wake: (() => void) | undefined;
  const woken = () => wake?.();
  const add = async (partition: number | undefined, fromStart: boolean) => {
    const path = sharedOutcomesPath(partition === undefined ? queue : partitionName(queue, partition), consumer);
    const reader = new OutcomeFileReader(driver, path, start?.get(partition ?? 0) ?? 0);
    if (start === undefined && !fromStart) await reader.skipToEnd();
    sources.set(partition, { partition, reader, stopWake: onOutcomes(outcomeWakeKey(driver.storageKey, path), woken) });
  };
  /** Partitions declared now that are not followed yet (a partition added later is read from its start). */
  const addPartitions = async (first: boolean) => {
    const count = partitioned ? ((await readPartitions(driver, queue)) ?? 0) : 0;
    if (!partitioned) return first ? add(undefined, from === "oldest") : undefined;
    for (let p = 0; p < count; p++) if (!sources.has(p)) await add(p, !first || from === "oldest");
  };
  const cursorOf = (): string =>
    partitioned ? [...sources.values()].map((s) => `${s.partition}:${s.reader.lastId}`).join(",") : String(sources.get(undefined)!.reader.lastId);
  try {
    await addPartitions(true);
    let checkedAt = Date.now();
    // A whole pass, then the signal: one aborted before the first wait still gives the events there.
    for (;;) {
      let any = false;
      for (const source of sources.values()) {
        for (const event of await source.reader.read()) {
          any = true;
          // The cursor as if only the events before this one were read, in every partition.
          const at = source.reader.lastId;
          source.reader.lastId = event.id;
          const cursor = cursorOf();
          source.reader.lastId = at;
          yield { ...event, ...(source.partition !== undefined && { partition: source.partition }), cursor };
        }
      }
      if (partitioned && Date.now() - checkedAt >= PARTITIONS_RECHECK_MS) {
        await addPartitions(false);
        checkedAt = Date.now();
      }
      if (signal?.aborted) return;
      if (any) continue;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        wake = done;
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  } finally {
    for (const source of sources.values()) {
      source.stopWake();
      await source.reader.close();
    }
  }
}

/**
 * Waits for a message's end in shared consumer `consumer`'s outcomes: its `completed` event
 * (with the result) or its `dead` event; undefined when none came within `timeoutMs`. Looks
 * through every event the log keeps first: an end that happened before the call is found.
 */
export async function waitForOutcome(
  queue: string,
  consumer: string,
  message: OutcomeMessage,
  options: WaitForOutcomeOptions,
): Promise<OutcomeEvent | undefined> {
  assertName(queue, "queue");
  assertName(consumer, "consumer", queue);
  checkOption("driver", options?.driver, checkDriver);
  const { driver } = options;
  checkInteger("part", message.part, 0, Number.MAX_SAFE_INTEGER);
  checkInteger("offset", message.offset, 0, Number.MAX_SAFE_INTEGER);
  const { timeoutMs, signal } = options;
  if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, 2 ** 31 - 1);
  const partitions = await readPartitions(driver, queue);
  const { partition } = message;
  if (partitions !== undefined) {
    if (partition === undefined)
      throw new VQueueError("E_OPTION", `Queue "${queue}" is partitioned: give the message's partition (0 to ${partitions - 1}) with its part and offset.`);
    checkInteger("partition", partition, 0, partitions - 1);
  } else if (partition !== undefined) throw new VQueueError("E_OPTION", `Queue "${queue}" is not partitioned: give no partition.`);
  const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
  const stop = new AbortController();
  const timer = deadline === undefined ? undefined : setTimeout(() => stop.abort(), Math.max(0, deadline - Date.now()));
  const onAbort = () => stop.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  const queueOf = partition === undefined ? queue : partitionName(queue, partition);
  const asEvent = (event: StoredOutcome): OutcomeEvent =>
    partition === undefined ? { ...event, cursor: String(event.id) } : { ...event, partition, cursor: `${partition}:${event.id}` };
  // Shared by the waiters of this log in this process (outcome-index.ts): each reads only what is new.
  const index = OutcomeIndex.use(driver, sharedOutcomesPath(queueOf, consumer), pollInterval(driver, options.pollIntervalMs));
  try {
    const found = await index.find(message.part, message.offset);
    if (found) return asEvent(found);
    if (found === undefined) {
      // The index let it go (a bound on its memory): the log is read through.
      for await (const event of followOutcomes(queueOf, consumer, { driver, from: "oldest", signal: stop.signal, pollIntervalMs: options.pollIntervalMs }))
        if (isEnd(event.kind) && event.part === message.part && event.offset === message.offset) return asEvent(event);
      return undefined;
    }
    const event = await index.next(message.part, message.offset, stop.signal);
    return event && asEvent(event);
  } finally {
    index.release();
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Where consumer `consumer`'s outcomes are now: given as `after`, `followOutcomes` gives what is
 * written from this call on, whenever its reading starts (`from: "now"` is where its first
 * read finds the logs). On a partitioned queue, each partition's place.
 */
export async function outcomeCursorNow(queue: string, consumer: string, options: { driver: QueueDriver }): Promise<string> {
  assertName(queue, "queue");
  assertName(consumer, "consumer", queue);
  checkOption("driver", options?.driver, checkDriver);
  const { driver } = options;
  const lastId = async (logQueue: string) => {
    const reader = new OutcomeFileReader(driver, sharedOutcomesPath(logQueue, consumer), 0);
    try {
      await reader.skipToEnd();
      return reader.lastId;
    } finally {
      await reader.close();
    }
  };
  const partitions = await readPartitions(driver, queue);
  if (partitions === undefined) return String(await lastId(queue));
  const ids: string[] = [];
  for (let p = 0; p < partitions; p++) ids.push(`${p}:${await lastId(partitionName(queue, p))}`);
  return ids.join(",");
}

function pollInterval(driver: QueueDriver, given: number | undefined): number {
  if (given !== undefined) checkInteger("pollIntervalMs", given, 1, 3_600_000);
  return given ?? driver.pollIntervalMs ?? DEFAULT_POLL_MS;
}

/**
 * A cursor as `followOutcomes` gives it: an event id, or on a partitioned queue `<partition>:<id>`
 * per partition, comma-separated; `E_OPTION` naming it `name` otherwise.
 */
export function parseOutcomeCursor(cursor: string, partitioned: boolean, name = "cursor"): Map<number, number> {
  const bad = () =>
    new VQueueError(
      "E_OPTION",
      `Invalid ${name} ${JSON.stringify(cursor)}: give an event's cursor as it was given (${partitioned ? '"<partition>:<id>,...", e.g. "0:12,1:7"' : 'an event id, e.g. "12"'}).`,
    );
  if (!partitioned) {
    if (!/^\d{1,15}$/.test(cursor)) throw bad();
    return new Map([[0, Number(cursor)]]);
  }
  const ids = new Map<number, number>();
  for (const item of cursor.split(",")) {
    const match = /^(\d{1,6}):(\d{1,15})$/.exec(item);
    if (!match) throw bad();
    ids.set(Number(match[1]), Number(match[2]));
  }
  return ids;
}
