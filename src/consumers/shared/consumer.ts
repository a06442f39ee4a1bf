// Over 300 lines: the calls of a shared consumer (open, poll, ack, ackAll, nack, extend, close)
// and how they use its parts, each in its own file: the window (window.ts), the lease ids and
// checks (leases.ts), the hand-out (hand-out.ts), the journal (journal.ts), the inbox
// (inbox.ts), dead-lettering (dead-lettering.ts) and the iterator (iterate.ts).
import { checkInteger } from "../../options/queue";
import { QueueConsumer } from "../ordered/consumer";
import type { ConsumerPosition } from "../../format/position";
import { DeadLettering } from "./dead-lettering";
import { VQueueError } from "../../core/errors";
import { assertName } from "../../core/names";
import { MAX_LEASE_MS, resolveSharedOptions, type ResolvedSharedOptions, type SharedConsumerOptions } from "../../options/shared";
import { isBelow, messageKey } from "../state/shared-state";
import { SharedWindow, type WindowEntry } from "./window";
import { SharedJournal } from "./journal";
import { SharedInbox } from "./inbox";
import { SharedLeases } from "./leases";
import { HandOut } from "./hand-out";
import { iterateShared } from "./iterate";
import { PriorityAhead } from "./priority";
import { backoffDelay } from "../../format/attributes";
import { outcomeValueJson } from "../../format/outcome";
import type {
  AckAllOptions,
  AckOptions,
  LeasedMessage,
  LeaseRef,
  LeasingConsumer,
  NackOptions,
  SharedIterateOptions,
  SharedPollOptions,
  SharedStats,
} from "../types";

export type { LeasedMessage, LeaseRef, SharedPollOptions, NackOptions, SharedStats, AckOptions, AckAllOptions } from "../types";

/** A nack's `error` is kept up to this many characters. */
export const MAX_ERROR_CHARS = 4096;

const open = new Map<string, Promise<SharedConsumer>>();

/**
 * A consumer name that many workers share: each `poll` leases messages to its caller, one
 * worker at a time per message, and each is acknowledged on its own (docs/work-queues.md).
 * One object per (storage, queue, name) in a process: opening it again gives the same object
 * (each `open` takes one `close`). It holds the consumer's lock, so another process gets
 * `E_LOCKED` and reaches it through a server.
 *
 * State: the ack floor is the crate's pop line, kept by an ordered `QueueConsumer` whose reader
 * is the read head; acks above the floor and delivery counts are in the journal (journal.ts,
 * over consumers/state/shared-state.ts); leases are in memory only (after a restart every
 * unacknowledged message comes again).
 */
export class SharedConsumer implements LeasingConsumer {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedSharedOptions;
  readonly #key: string;
  readonly #inner: QueueConsumer;
  readonly #window: SharedWindow;
  readonly #journal: SharedJournal;
  #refs = 1;
  /** The promise `open` keeps for this consumer (see open()). */
  #entry: Promise<SharedConsumer> | undefined;
  #closed = false;
  readonly #leases: SharedLeases;
  readonly #deadLetters: DeadLettering;
  readonly #handOut: HandOut;
  /** Wakes the waiting polls (a function kept: passed to promises). */
  readonly #wake = (): void => this.#handOut.notify();
  readonly #inbox: SharedInbox;
  readonly #priority: PriorityAhead;

  private constructor(key: string, inner: QueueConsumer, window: SharedWindow, journal: SharedJournal, options: ResolvedSharedOptions) {
    this.queue = inner.queue;
    this.name = inner.name;
    this.options = options;
    this.#key = key;
    this.#inner = inner;
    this.#window = window;
    this.#journal = journal;
    this.#leases = new SharedLeases(this.queue, this.name, window, journal);
    this.#priority = new PriorityAhead(options.driver, this.queue, this.name, { ...options, onProblem: options.onProblem });
    this.#inbox = new SharedInbox({
      queue: this.queue,
      name: this.name,
      options,
      lock: inner.lock,
      leases: this.#leases,
      nack: (entry, nack) => this.#nack(entry, nack),
      ackAll: (refs, results) => this.#ackAll(refs, results),
      progress: (entry, json) => this.#progress(entry, json),
      backOff: (until) => this.#backOff(until),
    });
    this.#deadLetters = new DeadLettering({
      queue: this.queue,
      name: this.name,
      options,
      journal,
      lease: () => this.#leases.next(),
      ack: (entry, line) => this.#ack(entry, line, "dead"),
    });
    this.#handOut = new HandOut({
      options,
      head: inner,
      window,
      journal,
      inbox: this.#inbox,
      leases: this.#leases,
      deadLetters: this.#deadLetters,
      priority: this.#priority,
      isClosed: () => this.#closed,
    });
  }

  /** Opens (by default creates) shared consumer `name` of `queue`: `E_KIND` when the name is an ordered consumer's. */
  static async open(queue: string, name: string, options: SharedConsumerOptions = {}): Promise<SharedConsumer> {
    assertName(queue, "queue");
    assertName(name, "consumer", queue);
    const resolved = resolveSharedOptions(queue, options);
    const key = `${resolved.driver.storageKey}\u0000${queue}\u0000${name}`;
    const existing = open.get(key);
    if (existing) {
      const consumer = await existing;
      // One whose lock is lost refuses every call: not handed out again (its holders close it), a new one is opened.
      if (!consumer.#inner.lock.lost?.aborted) {
        consumer.#refs++;
        return consumer;
      }
      if (open.get(key) === existing) open.delete(key);
    }
    const opening = (async () => {
      const inner = await QueueConsumer.open(queue, name, resolved, "shared");
      try {
        const window = new SharedWindow();
        const consumer = new SharedConsumer(key, inner, window, await SharedJournal.open(inner, resolved, window), resolved);
        // Acks other instances took meanwhile, before anything goes out again.
        await consumer.#inbox.check();
        return consumer;
      } catch (error) {
        await inner.close();
        throw error;
      }
    })();
    open.set(key, opening);
    // Its own entry, so that a close after a lost lock never forgets the consumer opened in its place.
    void opening.then(
      (consumer) => (consumer.#entry = opening),
      () => {},
    );
    return opening.catch((error: unknown) => {
      open.delete(key);
      throw error;
    });
  }

  /** The ack floor: every message before it is acknowledged (the crate's pop line). */
  get floor(): ConsumerPosition {
    return { ...this.#journal.floor };
  }

  /** What the consumer holds now: leases, messages coming again, dead letters, the oldest unacknowledged (O(window size)). */
  get stats(): SharedStats {
    const now = Date.now();
    const { inFlight, ready, waiting, redelivered, oldest } = this.#window.summary(now);
    const message = oldest?.message;
    const limitedUntil = this.#journal.limiter.limitedUntil(now);
    return {
      // Backing off, or the rate limit's window spent: nothing goes out before then.
      ...(limitedUntil !== undefined && { limitedUntil }),
      inFlight,
      ready,
      waiting,
      window: this.#window.size,
      redelivered: this.#handOut.redelivered,
      redeliveredPending: redelivered,
      deadLettered: this.#journal.deadLettered,
      deadLetteredTotal: this.#journal.deadLetteredTotal,
      oldestUnacked: message
        ? {
            part: message.part,
            offset: message.offset,
            seq: message.seq,
            deliveries: oldest.deliveries,
            waitedMs: oldest.firstAt === undefined ? undefined : now - oldest.firstAt,
          }
        : null,
      ackFloor: this.floor,
    };
  }

  /** The highest priority of the messages it tracks that may go out now (0 when none; new ones are found at the next poll). */
  get topPriority(): number {
    return this.#window.topPriority(Date.now());
  }

  /** Whether this consumer still holds its lock (see `QueueConsumer.holds`). */
  holds(): Promise<boolean> {
    return this.#closed ? Promise.resolve(false) : this.#inner.holds();
  }

  /** Calls `listener` once when this consumer's lock is lost (see `QueueConsumer.whenLockLost`). */
  whenLockLost(listener: () => void): void {
    this.#inner.whenLockLost(listener);
  }

  /**
   * Reads the inbox now, then every few ms for a while: for a holder asked to hand this consumer
   * over, whose leases are most often acked through the instance that asks (consumers/state/inbox-pace.ts).
   */
  hurryInbox(): void {
    this.#inbox.hurry();
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Leases up to `max` messages to the caller, waiting up to `timeoutMs` for the first:
   * messages that came back (nacked, or whose lease ran out) first, oldest first, then new
   * ones. Fewer (or none, after the wait) while `maxInFlight` leases run, or while the oldest
   * unacknowledged message holds the window (`maxAckWindow`). A message due for its
   * `maxDeliveries + 1`-th delivery goes to the dead-letter queue instead.
   */
  async poll(options: SharedPollOptions = {}): Promise<LeasedMessage[]> {
    this.#assertOpen();
    const { max = 10, maxBytes = Infinity, leaseMs = this.options.leaseMs, signal, timeoutMs } = options;
    checkInteger("max", max, 1, 1_000_000);
    checkInteger("leaseMs", leaseMs, 1, MAX_LEASE_MS);
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, MAX_LEASE_MS);
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    // Once per poll: a lease that ran out since the inbox was last read waits for one read of it.
    let inboxFirst = true;
    for (;;) {
      const { leased: got, counted, inbox, scannedAt, groupsFreeAt } = await this.#handOut.take(max, leaseMs, maxBytes, inboxFirst);
      // Counted before it goes out: a crash never forgets a delivery. Awaited after the take
      // (takes run one at a time), so that concurrent polls share one journal write (and fsync).
      await counted;
      if (got.length > 0 || signal?.aborted || this.#closed) return got;
      if (inbox) {
        inboxFirst = false;
        await this.#inbox.now();
        continue;
      }
      const remaining = deadline === undefined ? undefined : deadline - Date.now();
      if (remaining !== undefined && remaining <= 0) return [];
      await this.#handOut.wait(remaining, signal, scannedAt, groupsFreeAt);
    }
  }

  /**
   * Acknowledges a message: resolves once that is durable (journal line, fsync'd with
   * `syncCommits`); concurrent acks share one write. Accepted from a worker whose lease ran
   * out while nobody else took it (the work is done); `E_LEASE` when another worker holds it now.
   * A message acknowledged already resolves at once. `result`: kept with its `completed` outcome.
   */
  ack(ref: LeaseRef, options?: AckOptions): Promise<void> {
    // Straight to the one entry: this runs per message, and ackAll's bookkeeping costs per call.
    try {
      this.#assertOpen();
      const result = options?.result === undefined ? undefined : outcomeValueJson("result", options.result);
      const key = messageKey(ref.part, ref.offset);
      if (this.#journal.bornAfter(ref.lease)) throw this.#leases.earlierConsumer(key, ref, "ack");
      const entry = this.#window.get(key);
      if (entry) {
        const refused = this.#leases.ackRefusal(entry, ref);
        if (refused) throw refused;
        return entry.state === "acked" ? (entry.acking ?? Promise.resolve()) : this.#ackEntries([entry], "", [result]);
      }
      if (isBelow(key, this.#journal.floor) || this.#journal.ackedBefore(ref.part, ref.offset, key)) return Promise.resolve();
      if (this.#journal.handedOutBefore(ref.part, ref.offset, key)) return this.#ackAhead([ref], [result]);
      throw this.#leases.notHandedOut(key);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Acknowledges many messages in one journal write (as `ack` each); resolves once durable,
   * with each one's error (`E_LEASE` for a message not handed out), or undefined when acked.
   */
  async ackAll(refs: LeaseRef[], options?: AckAllOptions): Promise<(Error | undefined)[]> {
    this.#assertOpen();
    const results = options?.results;
    return this.#ackAll(refs, results && refs.map((_, i) => (results[i] === undefined ? undefined : outcomeValueJson("result", results[i]))));
  }

  /** `ackAll` with results checked already, as JSON (`outcomeValueJson`): a partitioned consumer's, which checks them once for all partitions. */
  async ackJson(refs: LeaseRef[], results?: readonly (string | undefined)[]): Promise<(Error | undefined)[]> {
    this.#assertOpen();
    return this.#ackAll(refs, results);
  }

  /** `ackAll`, also while closing (the inbox's last read); `results`: each one's as JSON (`outcomeValueJson`). */
  async #ackAll(refs: LeaseRef[], results?: readonly (string | undefined)[]): Promise<(Error | undefined)[]> {
    const errors: (Error | undefined)[] = new Array(refs.length).fill(undefined);
    /** Each entry to ack, with its result. */
    const entries = new Map<WindowEntry, string | undefined>();
    const waits: Promise<unknown>[] = [];
    /** Handed out before (by an earlier holder), not read here yet: index of each ref. */
    const ahead = new Map<string, number[]>();
    refs.forEach((ref, i) => {
      const key = messageKey(ref.part, ref.offset);
      const entry = this.#window.get(key);
      const refused = this.#journal.bornAfter(ref.lease) ? this.#leases.earlierConsumer(key, ref, "ack") : entry && this.#leases.ackRefusal(entry, ref);
      if (refused) errors[i] = refused;
      else if (entry && entry.state === "acked") waits.push((entry.acking ?? Promise.resolve()).catch((error: Error) => (errors[i] = error)));
      else if (entry) entries.set(entry, results?.[i]);
      else if (!isBelow(key, this.#journal.floor) && !this.#journal.ackedBefore(ref.part, ref.offset, key)) {
        if (this.#journal.handedOutBefore(ref.part, ref.offset, key)) ahead.set(key, [...(ahead.get(key) ?? []), i]);
        else errors[i] = this.#leases.notHandedOut(key);
      }
    });
    if (ahead.size > 0) {
      const firsts = [...ahead.values()].map((indexes) => indexes[0]!);
      waits.push(
        this.#ackAhead(
          firsts.map((i) => refs[i]!),
          firsts.map((i) => results?.[i]),
        ).catch((error: Error) => [...ahead.values()].flat().forEach((i) => (errors[i] = error))),
      );
    }
    if (entries.size > 0) {
      // One round: its entries are written together, or not at all.
      waits.push(
        this.#ackEntries([...entries.keys()], "", [...entries.values()]).catch((error: Error) =>
          refs.forEach((ref, i) => entries.has(this.#window.get(messageKey(ref.part, ref.offset))!) && (errors[i] = error)),
        ),
      );
    }
    await Promise.all(waits);
    return errors;
  }

  /** Gives a message back: it comes again after `delayMs`, or goes to the dead-letter queue after `maxDeliveries` (or at once with `deadLetter`). */
  async nack(ref: LeaseRef, options: NackOptions = {}): Promise<void> {
    this.#assertOpen();
    const { delayMs, defaultDelayMs, error, deadLetter = false, release = false } = options;
    if (delayMs !== undefined) checkInteger("delayMs", delayMs, 0, MAX_LEASE_MS);
    if (defaultDelayMs !== undefined) checkInteger("defaultDelayMs", defaultDelayMs, 0, MAX_LEASE_MS);
    if (release && deadLetter) throw new VQueueError("E_OPTION", "Invalid nack: release and deadLetter exclude each other.");
    return this.#nack(this.#leases.leased(ref, "nack"), { delayMs, defaultDelayMs, error, deadLetter, release });
  }

  async #nack(entry: WindowEntry, { delayMs, defaultDelayMs = 0, error, deadLetter = false, release = false }: NackOptions): Promise<void> {
    if (error !== undefined) entry.error = String(error).slice(0, MAX_ERROR_CHARS);
    if (release) entry.deliveries = Math.max(0, entry.deliveries - 1);
    else if (deadLetter || entry.deliveries >= (entry.attributes?.maxDeliveries ?? this.options.maxDeliveries)) return this.#deadLetters.move(entry);
    // A failure without a delay of its own waits as the message's backoff says, or the consumer's.
    const backoff = entry.attributes?.backoff ?? this.options.backoff;
    entry.state = "ready";
    entry.until = Date.now() + (release ? (delayMs ?? 0) : (delayMs ?? (backoff ? backoffDelay(backoff, entry.deliveries) : defaultDelayMs)));
    this.#handOut.notify();
    // Nobody worked on a released one: no outcome.
    if (release) return;
    const outcomes = this.#journal.outcomes;
    if (!outcomes) return;
    outcomes.record("failed", entry, { error: entry.error, retryAt: entry.until });
    await outcomes.flush(this.options.syncCommits);
  }

  /**
   * Reports how far a lease's handler is: a `progress` event in the consumer's outcomes
   * (docs/work-queues.md#outcomes); `E_LEASE` unless the message is leased under `ref` now.
   * Resolves once durable. With outcomes not kept (`outcomes: false`), the lease and the value are
   * checked and nothing is kept.
   */
  async progress(ref: LeaseRef, progress: unknown): Promise<void> {
    this.#assertOpen();
    const json = outcomeValueJson("progress", progress);
    if (json === undefined) throw new VQueueError("E_OPTION", "Invalid progress: undefined; give a JSON value (a number, a string, an object...).");
    return this.#progress(this.#leases.leased(ref, "progress"), json);
  }

  #progress(entry: WindowEntry, json: string): Promise<void> {
    const outcomes = this.#journal.outcomes;
    if (!outcomes) return Promise.resolve();
    outcomes.record("progress", entry, { valueJson: json });
    return outcomes.flush(this.options.syncCommits);
  }

  /**
   * Hands nothing out to anyone for `ms` (BullMQ's `rateLimit`: a handler was told to slow down,
   * an API's 429 say): running leases go on, polls wait (a long poll up to its timeout). A
   * back-off that ends later is kept. Resolves with its end (ms since the epoch) once durable:
   * the consumer's next holder (another instance, a restart) keeps it too.
   */
  backOff(ms: number): Promise<number> {
    try {
      this.#assertOpen();
      checkInteger("ms", ms, 0, MAX_LEASE_MS);
      return this.#backOff(Date.now() + ms);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async #backOff(until: number): Promise<number> {
    const line = this.#journal.limiter.backOff(Math.min(until, Date.now() + MAX_LEASE_MS));
    // The waiting polls look again: they sleep until its end now.
    this.#handOut.notify();
    await this.#journal.write(line);
    return this.#journal.limiter.pausedUntil;
  }

  /** Keeps a lease for `leaseMs` more from now (a long job); resolves with its new end. */
  async extend(ref: LeaseRef, options: { leaseMs?: number } = {}): Promise<number> {
    this.#assertOpen();
    const { leaseMs = this.options.leaseMs } = options;
    checkInteger("leaseMs", leaseMs, 1, MAX_LEASE_MS);
    const entry = this.#leases.leased(ref, "extend");
    entry.until = Date.now() + leaseMs;
    return entry.until;
  }

  /** Gives a lease back unworked: `nack` with `release` (its delivery is not counted, it never dead-letters). */
  release(ref: LeaseRef): Promise<void> {
    return this.nack(ref, { release: true });
  }

  /** Leased messages as an async iterator: acked when the loop body is done with one, nacked when it throws or breaks. */
  messages(options: SharedIterateOptions = {}): AsyncGenerator<LeasedMessage, void, undefined> {
    return iterateShared(this, options);
  }

  /**
   * Closes this handle; the last `close` of the process waits for the writes in flight, saves
   * a snapshot and releases the lock. Leases end: their messages come again at the next open.
   */
  async close(): Promise<void> {
    if (this.#closed || --this.#refs > 0) return;
    this.#closed = true;
    if (open.get(this.#key) === this.#entry) open.delete(this.#key);
    this.#handOut.notify();
    // The journal puts off no floor save from now on, and closes once no inbox read nor take runs.
    const drained = (async () => {
      await this.#inbox.close();
      await this.#handOut.idle();
    })();
    try {
      await this.#journal.close(drained);
    } finally {
      await this.#deadLetters.close();
      await this.#priority.close();
      await this.#inner.close();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // --- Internals ---

  #assertOpen(): void {
    if (this.#closed) throw new VQueueError("E_CLOSED", `Shared consumer "${this.name}" of queue "${this.queue}" is closed.`);
  }

  /** `extra`: lines written with the ack, in the same journal write; `end`: its outcome (a dead letter's is `dead`). */
  #ack(entry: WindowEntry, extra = "", end: "completed" | "dead" = "completed"): Promise<void> {
    if (entry.state === "acked") return entry.acking ?? Promise.resolve();
    return this.#ackEntries([entry], extra, undefined, end);
  }

  /**
   * Marks entries (not acked yet) acknowledged, in the next journal write (with `extra` lines):
   * the write renders the round's acks as ranges, and appends their outcomes (`results[i]`:
   * `entries[i]`'s, as JSON). Not written: they go back (the journal's `failed` hook).
   */
  #ackEntries(entries: WindowEntry[], extra = "", results?: readonly (string | undefined)[], end: "completed" | "dead" = "completed"): Promise<void> {
    const outcomes = this.#journal.outcomes;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]!;
      entry.state = "acked";
      entry.until = 0;
      if (!outcomes) continue;
      if (end === "dead") outcomes.record("dead", entry, { error: entry.error });
      else outcomes.record("completed", entry, results?.[i] === undefined ? undefined : { valueJson: results[i] });
    }
    const acking = this.#journal.write(extra, entries);
    for (const entry of entries) entry.acking = acking;
    this.#handOut.notify();
    // A group's next message has its turn once the ack is written (window.ts, hasTurn); or the
    // acked one again, if the write fails.
    if (entries.some((entry) => entry.groupLine !== undefined)) void acking.then(this.#wake, this.#wake);
    return acking;
  }

  /** Acknowledges messages an earlier holder handed out, not read here yet (`SharedJournal.ackAhead`), with their outcomes. */
  #ackAhead(refs: readonly LeaseRef[], results: readonly (string | undefined)[]): Promise<void> {
    const keys = refs.map((ref) => messageKey(ref.part, ref.offset));
    const outcomes = this.#journal.outcomes;
    if (outcomes)
      refs.forEach((ref, i) =>
        outcomes.record(
          "completed",
          { part: ref.part, offset: ref.offset, deliveries: this.#journal.deliveriesBefore(keys[i]!) },
          results[i] === undefined ? undefined : { valueJson: results[i] },
        ),
      );
    return this.#journal.ackAhead(keys);
  }
}

/** Opens shared consumer `name` of `queue`. See `SharedConsumer`. */
export function openSharedConsumer(queue: string, name: string, options?: SharedConsumerOptions): Promise<SharedConsumer> {
  return SharedConsumer.open(queue, name, options);
}
