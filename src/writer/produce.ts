/**
 * `QueueWriter.produce`: pushes with an idempotency key and delayed pushes, on the writer's
 * side stores (writer/idempotency.ts, writer/delayed.ts). The writer holds these for its life and calls in
 * at a few points only: open, before a batch with keyed pushes is written, close.
 */
import { checkOption } from "../core/check";
import { DelayedStore, type DueMessage } from "./delayed";
import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { checkKey, IdempotencyStore, type Intent, type ProduceResult } from "./idempotency";
import type { EncodedInput, MessagePosition } from "../format/message";
import type { ResolvedQueueOptions } from "../options/queue";
import { attributeProblems, meaningfulAttributes, type Backoff, type MessageAttributes } from "../format/attributes";
import { FIRE_KEY_PREFIX, ScheduleStore } from "./schedules";

export type { ProduceResult } from "./idempotency";

/** Options of `QueueWriter.produce`. */
export interface ProduceOptions {
  /**
   * An idempotency key: a produce whose key was accepted within `idempotencyWindowMs` is not
   * written again and answers the first result (`replayed: true`), whatever its messages.
   * 1 to 255 printable ASCII characters.
   */
  key?: string;
  /** Deliver no earlier than this many ms from now (0 to `MAX_DELAY_MS`). */
  delayMs?: number;
  /** Deliver no earlier than this time: a Date, ms since the epoch or an ISO 8601 date (at most `MAX_DELAY_MS` ahead). */
  at?: Date | number | string;
  /** 0 to 255, higher first: shared consumers lease higher-priority messages first (docs/work-queues.md#priorities). @default 0 */
  priority?: number;
  /** Deliveries to shared consumers before the message goes to the dead-letter queue. @default the consumer's `maxDeliveries` */
  maxDeliveries?: number;
  /** The wait before it comes again after a failed delivery (a nack without `delayMs`). @default the consumer's `backoff` */
  backoff?: Backoff;
  /**
   * A group (1 to 255 printable ASCII characters): shared consumers lease a group's messages in
   * order, `groupConcurrency` at a time (docs/work-queues.md#groups); on a partitioned queue it
   * picks the partition when no partition key does.
   */
  group?: string;
}

/** The longest delay: a year. */
export const MAX_DELAY_MS = 365 * 24 * 3600 * 1000;

/** What the writer gives its side stores. */
export interface WriterHooks {
  queue: string;
  driver: QueueDriver;
  options: ResolvedQueueOptions;
  /** The writer's lock: the fence of the side logs' writes (core/driver.ts). */
  lock: DriverLock;
  /** Enqueues a batch into the writer, tagged with `key` (its INTENT is written before the batch), with its messages' attributes. */
  enqueue(items: EncodedInput[], key: string, attributes?: MessageAttributes): Promise<MessagePosition[]>;
  /** Where a firing of this writer's schedules goes (a partitioned queue's partition 0); undefined: into this writer. */
  routeFiring?: FiringRoute;
}

/** Produces the firing of `key` elsewhere (another partition, through its writer); undefined when it belongs here. */
export type FiringRoute = (key: string, data: EncodedInput) => Promise<void> | undefined;

/** A pending push as the writer's batch holds it: how many messages, and its key if any. */
export interface KeyedPush {
  items: readonly unknown[];
  key?: string;
}

export class ProduceExtras {
  private constructor(
    readonly hooks: WriterHooks,
    readonly idempotency: IdempotencyStore,
    readonly delayed: DelayedStore,
    readonly schedules: ScheduleStore,
  ) {}

  static async open(hooks: WriterHooks): Promise<ProduceExtras> {
    const { driver, queue, options, lock } = hooks;
    const sync = options.durability !== "none";
    const idempotency = await IdempotencyStore.open(driver, queue, {
      windowMs: options.idempotencyWindowMs,
      maxKeys: options.idempotencyMaxKeys,
      sync,
      onProblem: options.onProblem,
      fence: lock,
    });
    let extras: ProduceExtras | undefined;
    let delayed: DelayedStore | undefined;
    try {
      delayed = await DelayedStore.open(driver, queue, {
        sync,
        syncMoved: options.durability === "fsync",
        fence: lock,
        max: options.maxDelayed,
        onProblem: options.onProblem,
        push: (messages) => extras!.#moveDue(messages),
        isMoved: (key) => idempotency.known(key) !== undefined,
        onMoved: (keys) => idempotency.forget(keys),
        onKeyed: async (key, count, until, acceptedAt) => {
          if (acceptedAt + options.idempotencyWindowMs > Date.now() && !idempotency.known(key)) await idempotency.accepted(key, { count, until }, acceptedAt);
        },
      });
      // Before the move keys go: the firings a crash left without their FIRED frame are settled from them.
      const schedules = await ScheduleStore.open(driver, queue, {
        sync,
        fence: lock,
        onProblem: options.onProblem,
        // Another partition's writer is not fenced by this lock: a fenced intent frame goes first (a writer paused past its lease fires nowhere).
        fencedIntent: hooks.routeFiring !== undefined,
        push: (key, data) => hooks.routeFiring?.(key, data) ?? extras!.fire(key, data),
        isFired: (key) => idempotency.known(key) !== undefined,
        firedKeys: () => idempotency.internalKeys(FIRE_KEY_PREFIX),
        onFired: (key) => idempotency.forget([key]),
      });
      extras = new ProduceExtras(hooks, idempotency, delayed, schedules);
      // Every move the keys tell of has its MOVED frame now: they go, and so do keys past their window.
      idempotency.forgetMoves();
      await idempotency.compact();
      return extras;
    } catch (error) {
      await delayed?.close().catch(() => {});
      await idempotency.close();
      throw error;
    }
  }

  /** A produce with options (see `ProduceOptions`): checked, then delayed and/or deduplicated. */
  async produce(items: EncodedInput[], options: ProduceOptions): Promise<ProduceResult> {
    const { key, due, attributes } = checkProduceOptions(options);
    const run = async () => {
      if (due !== undefined && due > Date.now()) {
        await this.delayed.add(items, due, key, attributes);
        return { count: items.length, until: due };
      }
      const positions = await this.hooks.enqueue(items, key ?? "", attributes);
      return { count: positions.length, first: positions[0]!, last: positions.at(-1)! };
    };
    if (key === undefined) return run().then((result) => ({ ...result, replayed: false }));
    return this.idempotency.run(key, run);
  }

  /** Before the writer writes a batch: the INTENTs of its keyed pushes, durable first. */
  beforeWrite(batch: readonly KeyedPush[], part: number, count: number): Promise<void> {
    const intents: Intent[] = [];
    let skip = 0;
    for (const push of batch) {
      if (push.key) intents.push({ key: push.key, skip, count: push.items.length });
      skip += push.items.length;
    }
    return intents.length > 0 ? this.idempotency.intents(intents, part, count) : Promise.resolve();
  }

  /** Moves the delayed messages due already and fires the schedules' missed ticks, then the others when due (the writer is open). */
  async start(): Promise<void> {
    await this.delayed.start();
    await this.schedules.start();
  }

  /** Stops moving delayed messages and firing schedules (the writer flushes after). */
  async stop(): Promise<void> {
    await Promise.all([this.delayed.stop(), this.schedules.stop()]);
  }

  async close(): Promise<void> {
    await Promise.all([this.delayed.close(), this.schedules.close(), this.idempotency.close()]);
  }

  /** Due messages into the queue, each under its own key, in one batch of the writer. */
  /** Produces a schedule's firing into this writer, once per key (idempotent within the window). */
  fire(key: string, data: EncodedInput): Promise<void> {
    return this.#moveDue([{ key, data }]);
  }

  async #moveDue(messages: DueMessage[]): Promise<void> {
    await Promise.all(
      messages.map((m) =>
        this.idempotency.run(m.key, async () => {
          const [position] = await this.hooks.enqueue([m.data], m.key, m.attributes);
          return { count: 1, first: position!, last: position! };
        }),
      ),
    );
  }
}

/** The options checked (`E_OPTION` saying what is allowed), the due time resolved, the attributes apart. */
export function checkProduceOptions(options: ProduceOptions): { key?: string; due?: number; attributes?: MessageAttributes } {
  const { key, delayMs, at, priority, maxDeliveries, backoff, group } = options;
  if (key !== undefined) checkOption("key", key, (value, name) => checkKey(value, name));
  const given = { priority, maxDeliveries, backoff, group };
  const problems = attributeProblems(given);
  if (problems.length > 0) throw new VQueueError("E_OPTION", problems.join(" "));
  const attributes = meaningfulAttributes(given);
  return { ...checkDue(delayMs, at), key, attributes };
}

/** The due time of `delayMs` or `at`, if either is given. */
function checkDue(delayMs: number | undefined, at: ProduceOptions["at"]): { due?: number } {
  if (delayMs !== undefined && at !== undefined) throw new VQueueError("E_OPTION", "Give delayMs or at, not both.");
  if (delayMs !== undefined) {
    checkOption("delayMs", delayMs, (value, name) =>
      Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DELAY_MS
        ? undefined
        : `Invalid ${name} ${JSON.stringify(value)}: use an integer from 0 to ${MAX_DELAY_MS} (a year).`,
    );
    return { due: Date.now() + delayMs };
  }
  if (at !== undefined) return { due: parseAt(at, "at") };
  return {};
}

/** A due time: a Date, ms since the epoch or an ISO 8601 date, at most a year ahead (a past time is now). */
export function parseAt(at: unknown, name: string): number {
  const time =
    at instanceof Date
      ? at.getTime()
      : typeof at === "number"
        ? at
        : typeof at === "string" && !/^\d+$/.test(at)
          ? Date.parse(at)
          : typeof at === "string"
            ? Number(at)
            : Number.NaN;
  if (!Number.isFinite(time))
    throw new VQueueError("E_OPTION", `Invalid ${name} ${JSON.stringify(at)}: use an ISO 8601 date (2026-01-31T12:00:00Z) or ms since the epoch.`);
  if (time > Date.now() + MAX_DELAY_MS) throw new VQueueError("E_OPTION", `Invalid ${name} ${JSON.stringify(at)}: at most a year ahead.`);
  return time;
}
