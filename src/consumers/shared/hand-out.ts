import type { ConsumerPosition } from "../../format/position";
import type { Message } from "../../format/message";
import type { ResolvedSharedOptions } from "../../options/shared";
import type { QueueConsumer } from "../ordered/consumer";
import { deliveryLine, messageKey } from "../state/shared-state";
import type { LeasedMessage } from "../types";
import type { DeadLettering } from "./dead-lettering";
import type { SharedInbox } from "./inbox";
import type { SharedJournal } from "./journal";
import type { SharedLeases } from "./leases";
import type { SharedWindow, WindowEntry } from "./window";
import { FAIR_EVERY, priorityOrder, type PriorityAhead } from "./priority";

/** The consumer whose messages are handed out: its parts, and whether it is closed. */
export interface HandOutConsumer {
  readonly options: ResolvedSharedOptions;
  /** The ordered consumer whose reader is the read head. */
  readonly head: QueueConsumer;
  readonly window: SharedWindow;
  readonly journal: SharedJournal;
  readonly inbox: SharedInbox;
  readonly leases: SharedLeases;
  readonly deadLetters: DeadLettering;
  /** Messages of a priority ahead of the head, and the attributes of those the head reads. */
  readonly priority: PriorityAhead;
  /** Once closed, nothing more is read ahead. */
  readonly isClosed: () => boolean;
}

/** What a take leased, and the journal write that counts it (awaited before the messages go out). */
export interface Taken {
  leased: LeasedMessage[];
  counted: Promise<void>;
  /** Nothing leased: a lease ran out since the inbox was last read, so read it first. */
  inbox?: true;
  /** When this take last looked at the window (what came due after it, it has not seen): for `wait`. */
  scannedAt: number;
  /** The earliest end of a group's spent rate limit that held back a message of the group: for `wait`. */
  groupsFreeAt?: number;
}

/**
 * How a shared consumer's polls hand messages out: `take` picks from the window (messages that
 * came back first, then new ones read at the head), leases them and counts each delivery in
 * the journal; `wait` waits until a take may find more; `notify` wakes the waiting ones.
 */
export class HandOut {
  readonly #consumer: HandOutConsumer;
  readonly #listeners = new Set<() => void>();
  /** Takes (scan, read ahead, dead letters) one at a time. */
  #serial: Promise<unknown> = Promise.resolve();
  #redelivered = 0;
  /** Hand-outs in priority order so far: every `FAIR_EVERY`-th goes to the oldest (priority.ts). */
  #ranked = 0;

  constructor(consumer: HandOutConsumer) {
    this.#consumer = consumer;
  }

  /** Hand-outs of a message handed out before, by this process. */
  get redelivered(): number {
    return this.#redelivered;
  }

  /**
   * Picks what may go out now, reading ahead while there is room (one take at a time: scans,
   * reads ahead and dead letters never interleave). `inboxFirst`: a lease that ran out since the
   * inbox was last read makes it return `inbox` (when it has nothing yet) instead of handing it out.
   */
  take(max: number, leaseMs: number, maxBytes: number, inboxFirst: boolean): Promise<Taken> {
    const run = this.#serial.then(() => this.#take(max, leaseMs, maxBytes, inboxFirst));
    this.#serial = run.catch(() => {});
    return run;
  }

  /** Resolves once no take runs. */
  idle(): Promise<unknown> {
    return this.#serial;
  }

  async #take(wanted: number, leaseMs: number, maxBytes: number, inboxFirst: boolean): Promise<Taken> {
    const { options, head, window, journal, inbox, leases, deadLetters, priority } = this.#consumer;
    // Backing off, or the rate limit's window spent: nothing now (`wait` sleeps until that changes).
    const max = Math.min(wanted, journal.limiter.budget(Date.now()));
    if (max === 0) return { leased: [], counted: Promise.resolve(), scannedAt: Date.now() };
    // Messages of a priority ahead of the head come into the window first, to go out before a backlog.
    const ahead = await priority.fetch(
      head.position,
      // Those taken ahead before and not gone out yet count: the window holds no more than a take's worth.
      // Once closed, nothing more is read (as at the head below): what the window holds may still go out.
      this.#consumer.isClosed() ? 0 : Math.min(max - window.readyAhead(Date.now()), options.maxAckWindow - window.size),
      (m) => window.get(messageKey(m.part, m.offset)) !== undefined,
    );
    for (const { message, attributes } of ahead) journal.trackAhead(message, attributes);
    // The oldest message's turn (priority.ts) needs it in the window: read at the head when none is.
    if (window.hasAhead && window.size < options.maxAckWindow && !this.#consumer.isClosed() && !window.hasReadyPlain(Date.now())) {
      const batch = await head.read({ max: Math.max(1, Math.ceil(max / FAIR_EVERY)) });
      if (batch.length > 0) journal.track(batch, await priority.index.lookup(batch, head.knownEnd));
    }
    const out: WindowEntry[] = [];
    const failed = new Set<WindowEntry>();
    let bytes = 0;
    let full = false;
    let lines = "";
    let mark: ConsumerPosition | undefined;
    const passed = (waiting: WindowEntry) => (lines += deliveryLine(waiting.key, 0));
    let scannedAt: number;
    let groupsFreeAt: number | undefined;
    for (;;) {
      const now = Date.now();
      scannedAt = now;
      // A back-off that came while this take read (the priorities ahead, the head): nothing more goes out.
      if (journal.limiter.budget(now) === 0) break;
      // Those that failed to move to the dead-letter queue take no place of the others.
      // Priorities among what may go out: all of it, ranked (once the window has seen one).
      const scan = window.scan(now, window.prioritized ? Infinity : max - out.length + failed.size, options.groupConcurrency, journal.groupLimiter.freeAt(now));
      groupsFreeAt = scan.groupsFreeAt;
      let room = Math.min(max - out.length, options.maxInFlight - scan.live);
      let moved = false;
      let skipped = false;
      // Ranked, as many as may go out (and a few more: dead letters and acked ones take no place).
      const available = scan.prioritized ? priorityOrder(scan.available, this.#ranked, room + failed.size + 8) : scan.available;
      for (const entry of available) {
        if (room <= 0) break;
        // Acked meanwhile, or given a later time (an inbox nack or extend, while a dead letter was being moved): not now.
        if (failed.has(entry) || entry.state === "acked" || entry.message === undefined || entry.until > now) continue;
        // Ran out since the inbox was last read: an ack or extend taken in time by another
        // instance may wait there. Read first (poll does, before it takes again), then it goes out or not.
        if (inboxFirst && entry.state === "leased" && entry.until > inbox.readAt) {
          if (out.length === 0) return { leased: [], counted: Promise.resolve(), inbox: true, scannedAt };
          continue;
        }
        // Back from a lease that ran out: that is its last failure.
        if (entry.state === "leased") entry.error = `its lease ran out (delivery ${entry.deliveries})`;
        // Counted before a restart, the error given then is not kept: say so rather than nothing.
        else if (entry.error === undefined && entry.deliveries > 0)
          entry.error = `delivery ${entry.deliveries} ended with a restart of the consumer (no error given)`;
        if (entry.deliveries >= (entry.attributes?.maxDeliveries ?? options.maxDeliveries)) {
          if (!(await deadLetters.tryMove(entry))) failed.add(entry);
          moved = true;
          continue;
        }
        const group = entry.attributes?.group;
        // Its group's rate limit spent by this take (a groupConcurrency above 1): the group waits.
        if (group !== undefined && journal.groupLimiter.budget(group, now) === 0) {
          skipped = true;
          continue;
        }
        // Past the byte budget: left for the next poll, not handed out (and not counted).
        if (out.length > 0 && bytes + entry.message!.size > maxBytes) {
          full = true;
          break;
        }
        bytes += entry.message!.size;
        entry.state = "leased";
        // First hand-outs: one mark after the newest counts them all, with a count of 0 for the
        // few it passes that wait still (a group's next, say). Others (handed out before, or far
        // ahead of the mark): a line of their own.
        if (entry.deliveries === 0 && window.passMark(entry, journal.mark, passed)) mark = entry.end;
        else lines += deliveryLine(entry.key, entry.deliveries + 1);
        if (++entry.deliveries > 1) this.#redelivered++;
        entry.firstAt ??= now;
        entry.lease = leases.next();
        entry.until = now + leaseMs;
        if (group !== undefined) journal.groupLimiter.spend(group, now);
        out.push(entry);
        if (scan.prioritized) this.#ranked++;
        room--;
      }
      if (full) break;
      // Dead letters, or a group's spent limit, took places of the scan: look again before reading more.
      if ((moved || skipped) && room > 0) continue;
      const space = Math.min(room, options.maxAckWindow - window.size);
      if (space <= 0 || this.#consumer.isClosed()) break;
      let batch: Message[];
      try {
        batch = await head.read({ max: space });
      } catch (error) {
        // Those leased above go out (they are counted below); the failure shows at the next poll.
        if (out.length > 0) break;
        throw error;
      }
      if (batch.length === 0) break;
      journal.track(batch, await priority.index.lookup(batch, head.knownEnd));
    }
    if (out.length === 0) return { leased: [], counted: Promise.resolve(), scannedAt, groupsFreeAt };
    const at = Date.now();
    lines += journal.markLine(mark) + journal.limiter.spend(at, out.length) + journal.groupLimiter.written(at);
    const counted = journal.write(lines);
    // Spelled out, not spread: this runs for every message handed out.
    const leased = out.map((entry) => {
      const m = entry.message!;
      const message: LeasedMessage = {
        part: m.part,
        offset: m.offset,
        seq: m.seq,
        type: m.type,
        data: m.data,
        size: m.size,
        crc: m.crc,
        deliveries: entry.deliveries,
        lease: entry.lease,
        leaseUntil: entry.until,
      };
      if (m.stored !== undefined) message.stored = m.stored;
      if (entry.attributes?.priority) message.priority = entry.attributes.priority;
      if (entry.attributes?.group !== undefined) message.group = entry.attributes.group;
      return message;
    });
    return { leased, counted, scannedAt };
  }

  /**
   * Waits for what may let a poll take more: a change (`notify`), the next lease's end, a new
   * message while there is room for it, `signal`, or `timeoutMs`.
   */
  async wait(timeoutMs: number | undefined, signal: AbortSignal | undefined, scannedAt: number, groupsFreeAt?: number): Promise<void> {
    const { options, head, window, journal } = this.#consumer;
    const now = Date.now();
    // Nothing may go out before then: neither a lease's end nor a new message changes that.
    const limitedUntil = journal.limiter.limitedUntil(now);
    // As of the poll's own take's look (`scannedAt`): a message that came due since (while the
    // take read ahead, say) wakes this wait at once (nextAt <= now) instead of at the end of the
    // long poll. One due before that look was left by the take for a reason (a dead letter that
    // failed to move): not looked at again before the next change, the next due time or the timeout.
    const { live, nextAt } = window.scan(scannedAt, 0);
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) stop.abort();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let off = () => {};
    const waits: Promise<unknown>[] = [
      new Promise<void>((resolve) => stop.signal.addEventListener("abort", () => resolve(), { once: true })),
      new Promise<void>((resolve) => (off = this.#onChange(resolve))),
    ];
    // A group held back by its rate limit: the take's look said until when (`groupsFreeAt`).
    const due = limitedUntil ?? Math.min(nextAt ?? Infinity, groupsFreeAt ?? Infinity);
    const ms = Math.min(timeoutMs ?? Infinity, due - now);
    if (ms !== Infinity) waits.push(new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, ms)))));
    // New messages matter only while there is room to hand them out.
    if (limitedUntil === undefined && live < options.maxInFlight && window.size < options.maxAckWindow)
      waits.push(head.wait({ signal: stop.signal }).catch(() => true)); // a failure shows at the next read
    try {
      await Promise.race(waits);
    } finally {
      stop.abort();
      clearTimeout(timer);
      off();
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Waiting polls look again: a lease ended, a message came back, a slot freed. */
  notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }

  #onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}
