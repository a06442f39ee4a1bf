/**
 * The two kinds of consumer, as interfaces that the plain and the partitioned classes both
 * implement (consumers/ordered/consumer.ts and consumers/ordered/partitioned.ts; consumers/shared/consumer.ts and consumers/shared/partitioned.ts),
 * and the types they share with their iterators. Types only: no runtime code, and no import of a
 * consumer class (the classes import this module, never the reverse).
 */
import type { ConsumerPosition } from "../format/position";
import type { Message } from "../format/message";
import type { IterateOptions, PollOptions, ReadOptions } from "../options/queue";
import type { SeekTarget } from "../log/seek";
import type { StoredOutcome } from "../format/outcome";

export type { OutcomeKind } from "../format/outcome";

/** A message as an ordered consumer hands it out: one of a partitioned queue names its partition. */
export type ConsumedMessage = Message & { partition?: number };

/**
 * An ordered consumer: one position per consumer name, messages in order, committed by cursor.
 * `QueueConsumer` (one queue) and `PartitionedConsumer` (each partition of a partitioned queue:
 * its messages carry `partition`, its cursors are composite) both are one.
 */
export interface OrderedConsumer<M extends ConsumedMessage = ConsumedMessage, T = SeekTarget> {
  readonly queue: string;
  readonly name: string;
  readonly closed: boolean;
  /** The cursor that commits everything handed out so far. */
  readonly cursor: string;
  /** The next messages, oldest first, without waiting ([] when there are none). */
  read(options?: ReadOptions): Promise<M[]>;
  /** The next messages, waiting up to `timeoutMs` (no limit when not given) for the first. */
  poll(options?: PollOptions): Promise<M[]>;
  /** Saves the position after everything handed out, or after a message, or up to a cursor. */
  commit(upTo?: M | string): Promise<void>;
  /** Hands out again what was handed out and not committed. */
  rewind(): Promise<void>;
  /** Moves the consumer and saves it there (backwards too); resolves with the cursor of where it now is. */
  seek(to: T): Promise<string>;
  /** Messages pushed but not yet committed. */
  lag(): Promise<number>;
  /** How many messages retention deleted before this consumer read them, since the last call. */
  takeMissed(): number;
  /** Messages as an async iterator that waits for new ones, committing as it goes (see `IterateOptions`). */
  messages(options?: IterateOptions): AsyncGenerator<M, void, undefined>;
  close(): Promise<void>;
}

/** A message leased to one worker: `ack`, `nack` or `extend` it with its `lease`. */
export interface LeasedMessage extends Message {
  /** Times it was handed out, this one included (kept across restarts). */
  deliveries: number;
  /** This hand-out's id: a later hand-out of the same message gets another. */
  lease: number;
  /** When the lease runs out (ms since the epoch); then the message goes to another worker. */
  leaseUntil: number;
  /** A partitioned queue's: the partition the message is in. */
  partition?: number;
  /** Its priority, when it was produced with one above 0 (docs/work-queues.md#priorities). */
  priority?: number;
  /** Its group, when it was produced in one (docs/work-queues.md#groups). */
  group?: string;
}

/** What names a lease: the message and its hand-out (and on a partitioned queue its partition). */
export type LeaseRef = Pick<LeasedMessage, "part" | "offset" | "lease" | "partition">;

export interface SharedPollOptions {
  /** Most messages to lease. @default 10 */
  max?: number;
  /** Stop adding messages once their bodies reach this many bytes (at least one is leased). @default no limit */
  maxBytes?: number;
  /** This poll's lease time. @default the consumer's `leaseMs` */
  leaseMs?: number;
  signal?: AbortSignal;
  /** Wait up to this long for the first message ([] then). @default no limit */
  timeoutMs?: number;
}

export interface SharedIterateOptions extends Omit<SharedPollOptions, "timeoutMs"> {
  /** Messages leased per poll; those not reached yet when the loop ends are nacked. @default 1 */
  max?: number;
}

/** `ack`'s options. */
export interface AckOptions {
  /** The handler's result: kept in the consumer's outcomes (JSON, at most 64 KiB as JSON). */
  result?: unknown;
}

/** `ackAll`'s options. */
export interface AckAllOptions {
  /** `results[i]`: the result of `refs[i]` (see `AckOptions.result`); undefined for none. */
  results?: readonly unknown[];
}

/**
 * What became of a message a shared consumer handed out (docs/work-queues.md#outcomes), as
 * `followOutcomes` and `waitForOutcome` give it.
 */
export interface OutcomeEvent extends StoredOutcome {
  /** A partitioned queue's: the partition the message is in (`part`, `offset` and `id` are that partition's). */
  partition?: number;
  /** Where a stream is after this event: given back as `after`, it resumes after it (an SSE id). */
  cursor: string;
}

export interface NackOptions {
  /** The message comes again after this long. @default its backoff (produce option), else the consumer's `backoff`, else `defaultDelayMs` */
  delayMs?: number;
  /** Without `delayMs`: the wait when neither the message nor the consumer has a backoff (what `worker()` sends for its own default). @default 0 */
  defaultDelayMs?: number;
  /** Why it failed: kept with a dead letter. */
  error?: string;
  /** Give up on it now: it goes to the dead-letter queue, whatever its deliveries. @default false */
  deadLetter?: boolean;
  /**
   * Not a failure: nobody worked on it (a worker stopping, a client gone before the answer).
   * This delivery is not counted and never dead-letters it (a restart before it goes out again
   * may still count it: counts are saved before hand-outs). @default false
   */
  release?: boolean;
}

/** What a leasing consumer is doing, live, in this process (for monitoring); a partitioned one sums its partitions held. */
export interface LeasingStats {
  /** Leases running now. */
  inFlight: number;
  /** Tracked messages that may go out now (nacked, or their lease ran out); new ones not read yet are not counted. */
  ready: number;
  /** Nacked with a delay: they come again later. */
  waiting: number;
  /** Messages tracked above the floor: leased, ready, waiting, or acknowledged out of order. */
  window: number;
  /** Hand-outs of a message that was handed out before, since this consumer was opened (delivery counts are kept across restarts). */
  redelivered: number;
  /** Messages tracked now, not acknowledged, that were handed out more than once. */
  redeliveredPending: number;
  /** Messages moved to the dead-letter queue since open. */
  deadLettered: number;
  /** Messages moved to the dead-letter queue since the consumer was created (kept in its state files). */
  deadLetteredTotal: number;
  /**
   * The oldest message not acknowledged (the one holding the floor; of a partitioned queue, the
   * one handed out longest ago, with its partition), its delivery count and how long since this
   * process first handed it out (`waitedMs`, undefined if not yet handed out).
   */
  oldestUnacked: { partition?: number; part: number; offset: number; seq: number; deliveries: number; waitedMs: number | undefined } | null;
  /**
   * Only while nothing may be handed out (a back-off, or the rate limit's window spent): when that
   * may change (ms since the epoch). A partitioned consumer's: the latest of its partitions held.
   */
  limitedUntil?: number;
}

/** `SharedConsumer.stats`: a leasing consumer's, with its ack floor. */
export interface SharedStats extends LeasingStats {
  /** The ack floor (the pop line): everything before it is acknowledged. */
  ackFloor: ConsumerPosition;
}

/**
 * A leasing (shared) consumer: many workers take messages, each leased to one at a time and
 * acknowledged on its own. `SharedConsumer` (one queue) and `PartitionedSharedConsumer` (its
 * leases carry `partition`) both are one.
 */
export interface LeasingConsumer<L extends LeasedMessage = LeasedMessage, R extends LeaseRef = LeaseRef> {
  readonly queue: string;
  readonly name: string;
  readonly closed: boolean;
  /** What the consumer holds now (see `LeasingStats`). */
  readonly stats: LeasingStats;
  /** Leases up to `max` messages, waiting up to `timeoutMs` (no limit when not given) for the first. */
  poll(options?: SharedPollOptions): Promise<L[]>;
  /** Acknowledges a lease, with the handler's result (kept in the outcomes): resolves once durable. */
  ack(ref: R, options?: AckOptions): Promise<void>;
  /** Acknowledges many leases; resolves with each one's error, or undefined when acked. */
  ackAll(refs: R[], options?: AckAllOptions): Promise<(Error | undefined)[]>;
  /** Reports how far a lease's handler is (a `progress` outcome event): `E_LEASE` unless it is leased now; resolves once durable. */
  progress(ref: R, progress: unknown): Promise<void>;
  /** Gives a lease back: the message comes again after `delayMs`, or goes to the dead-letter queue. */
  nack(ref: R, options?: NackOptions): Promise<void>;
  /** Keeps a lease `leaseMs` more from now; resolves with its new end. */
  extend(ref: R, options?: { leaseMs?: number }): Promise<number>;
  /** Gives a lease back unworked (`nack` with `release`): its delivery is not counted, it never dead-letters. */
  release(ref: R): Promise<void>;
  /** Leased messages as an async iterator: acked when the loop body is done with one, nacked when it throws or breaks. */
  messages(options?: SharedIterateOptions): AsyncGenerator<L, void, undefined>;
  close(): Promise<void>;
}
