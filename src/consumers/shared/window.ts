import { positionAfter, type ConsumerPosition } from "../../format/position";
import type { Message } from "../../format/message";
import { messageKey, type MessageKey } from "../state/shared-state";
import type { MessageAttributes } from "../../format/attributes";

/**
 * The messages of a shared consumer between its ack floor and its read head, oldest first:
 * what is leased, waiting to come again, or acknowledged out of order. Its length is capped
 * by the consumer (`maxAckWindow`), so its memory is too: each entry keeps its message's body
 * until it is acknowledged (then the body is dropped), to hand it out again without a re-read.
 */

export interface WindowEntry {
  key: MessageKey;
  /** Its number in the window: one more than the entry before it (-1 while it is ahead of the head, `addAhead`). */
  n: number;
  part: number;
  offset: number;
  /** The message's seq in its part: neighbours in a part differ by one (ack ranges). */
  seq: number;
  /** The position after the message: the floor once it and all before it are acknowledged. */
  end: ConsumerPosition;
  /** The message as first read; `undefined` once its ack is written. */
  message: Message | undefined;
  /** Handed out this many times (counted at hand-out, kept across restarts). */
  deliveries: number;
  /** `ready`: may be handed out from `until` on; `leased`: with a worker until `until`; `acked`: done. */
  state: "ready" | "leased" | "acked";
  until: number;
  /** The current lease's id (each hand-out gets a new one). */
  lease: number;
  /** Its ack line is written (only then may the floor pass it). */
  persisted: boolean;
  /** Resolves once the ack is durable (a second `ack` of the same message waits for it). */
  acking?: Promise<void>;
  /** The last error given to `nack`. */
  error?: string;
  /** When this process first handed it out (ms since the epoch): how long it has waited for its ack. */
  firstAt?: number;
  /** What it was produced with (format/attributes.ts): its priority, own maxDeliveries, backoff. */
  attributes?: MessageAttributes;
}

/** What the window holds at one moment (`SharedConsumer.stats`). */
export interface WindowSummary {
  /** Leases running. */
  inFlight: number;
  /** Tracked messages that may go out now: nacked, or whose lease ran out. */
  ready: number;
  /** Nacked with a delay: they come again later. */
  waiting: number;
  /** Not acknowledged and handed out more than once. */
  redelivered: number;
  /** The oldest message not acknowledged (the one at the floor), or undefined. */
  oldest: WindowEntry | undefined;
}

export class SharedWindow {
  #entries: WindowEntry[] = [];
  #head = 0;
  /** The number of `#entries[0]`. */
  #base = 0;
  /** The number of the oldest entry maybe never handed out nor acknowledged. */
  #fresh = 0;
  readonly #byKey = new Map<MessageKey, WindowEntry>();
  /** Messages of a priority taken ahead of the read head (hand-out.ts): in the window's order once the head reads them. */
  readonly #ahead = new Map<MessageKey, WindowEntry>();
  /** A message of a priority was tracked once: `topPriority` has something to look for. */
  #prioritized = false;
  /** A message of a group was tracked once: `scan` counts each group's messages. */
  #grouped = false;

  get size(): number {
    return this.#entries.length - this.#head + this.#ahead.size;
  }

  get(key: MessageKey): WindowEntry | undefined {
    return this.#byKey.get(key);
  }

  /** Adds the next message read at the head (one taken ahead of it before takes its place, as it is). */
  add(message: Message, deliveries: number, acked: boolean, attributes?: MessageAttributes): WindowEntry {
    const key = messageKey(message.part, message.offset);
    const ahead = this.#ahead.get(key);
    if (ahead) {
      this.#ahead.delete(key);
      ahead.n = this.#base + this.#entries.length;
      this.#entries.push(ahead);
      return ahead;
    }
    const entry = this.#entry(key, message, deliveries, acked, attributes);
    entry.n = this.#base + this.#entries.length;
    this.#entries.push(entry);
    this.#byKey.set(key, entry);
    return entry;
  }

  /** Adds a message of a priority ahead of the read head: handed out before the head reaches it. */
  addAhead(message: Message, deliveries: number, attributes: MessageAttributes | undefined): WindowEntry {
    const key = messageKey(message.part, message.offset);
    const entry = this.#entry(key, message, deliveries, false, attributes);
    this.#ahead.set(key, entry);
    this.#byKey.set(key, entry);
    return entry;
  }

  #entry(key: MessageKey, message: Message, deliveries: number, acked: boolean, attributes: MessageAttributes | undefined): WindowEntry {
    // Bytes are views into a 1 MiB read chunk: a copy, so a kept body does not keep the chunk.
    const kept = typeof message.data === "string" ? message : { ...message, data: message.data.slice() };
    const entry: WindowEntry = {
      key,
      n: -1,
      part: message.part,
      offset: message.offset,
      seq: message.seq,
      end: positionAfter(message),
      message: acked ? undefined : kept,
      deliveries,
      state: acked ? "acked" : "ready",
      until: 0,
      lease: 0,
      persisted: acked,
    };
    if (attributes) entry.attributes = attributes;
    if (attributes?.priority) this.#prioritized = true;
    if (attributes?.group !== undefined) this.#grouped = true;
    return entry;
  }

  /**
   * Before the first hand-out of `entry`: true when every entry before it was handed out or
   * acknowledged (then a high-water mark after it counts it). Amortised O(1).
   */
  firstHandOut(entry: WindowEntry): boolean {
    this.#fresh = Math.max(this.#fresh, this.#base + this.#head);
    for (let i = this.#fresh - this.#base; i < this.#entries.length; i++, this.#fresh++) {
      const next = this.#entries[i]!;
      if (next.state !== "acked" && next.deliveries === 0) break;
    }
    if (entry.n !== this.#fresh) return false;
    this.#fresh++;
    return true;
  }

  /**
   * One pass from the oldest: the leases still running, and the entries that may be handed
   * out now (ready, or leased past their time), up to `max`; of a group, only those among its
   * `groupLimit` oldest not acknowledged (docs/work-queues.md#groups), and none of a group
   * whose rate limit is spent (`groupFreeAt` says until when; the earliest is `groupsFreeAt`).
   * O(window size).
   */
  scan(
    now: number,
    max: number,
    groupLimit = 1,
    groupFreeAt?: (group: string) => number | undefined,
  ): { live: number; available: WindowEntry[]; nextAt: number | undefined; prioritized: boolean; groupsFreeAt: number | undefined } {
    let live = 0;
    let nextAt: number | undefined;
    let groupsFreeAt: number | undefined;
    let prioritized = false;
    const available: WindowEntry[] = [];
    /** Per group, its messages not acknowledged so far in the pass (only once a message had a group). */
    const groups = this.#grouped ? new Map<string, number>() : undefined;
    const visit = (entry: WindowEntry) => {
      if (entry.state === "acked") return;
      const group = groups && entry.attributes?.group;
      let turn = true;
      if (group !== undefined) {
        const before = groups!.get(group) ?? 0;
        groups!.set(group, before + 1);
        turn = before < groupLimit;
      }
      if (entry.until > now) {
        if (entry.state === "leased") live++;
        nextAt = nextAt === undefined ? entry.until : Math.min(nextAt, entry.until);
      } else if (turn) {
        // Its group's rate limit spent: it waits, and the rest of its group behind it.
        const freeAt = group !== undefined && groupFreeAt ? groupFreeAt(group) : undefined;
        if (freeAt !== undefined) groupsFreeAt = Math.min(groupsFreeAt ?? freeAt, freeAt);
        else {
          if (available.length < max) available.push(entry);
          prioritized ||= entry.attributes?.priority !== undefined;
        }
      }
    };
    // A plain loop: this runs at every take, over the whole window.
    for (let i = this.#head; i < this.#entries.length; i++) visit(this.#entries[i]!);
    if (this.#ahead.size > 0) for (const entry of this.#ahead.values()) visit(entry);
    return { live, available, nextAt, prioritized, groupsFreeAt };
  }

  /** Whether messages of a priority were taken ahead of the head (and are not in the window's order yet). */
  get hasAhead(): boolean {
    return this.#ahead.size > 0;
  }

  /** The highest priority of a message that may go out now, as far as the window knows (0 when none has one). O(window size) once any had one. */
  topPriority(now: number): number {
    if (!this.#prioritized) return 0;
    let top = 0;
    for (const entry of this.entries()) if (entry.state !== "acked" && entry.until <= now) top = Math.max(top, entry.attributes?.priority ?? 0);
    return top;
  }

  /**
   * An acknowledged entry taken ahead of the head, its ack written: it leaves the window (its
   * place and body); its ack is then the journal's, as a restart's loaded acks are. True when it was one.
   */
  forgetAhead(entry: WindowEntry): boolean {
    if (entry.n !== -1 || this.#ahead.get(entry.key) !== entry) return false;
    this.#ahead.delete(entry.key);
    this.#byKey.delete(entry.key);
    return true;
  }

  /** Entries ahead of the head that may go out now. O(those ahead). */
  readyAhead(now: number): number {
    let ready = 0;
    for (const entry of this.#ahead.values()) if (entry.state !== "acked" && entry.until <= now) ready++;
    return ready;
  }

  /** Whether a message of a priority was ever tracked (then a take ranks all that may go out). */
  get prioritized(): boolean {
    return this.#prioritized;
  }

  /** Whether a message without a priority may go out now (the oldest's turn, priority.ts, needs one). */
  hasReadyPlain(now: number): boolean {
    for (let i = this.#head; i < this.#entries.length; i++) {
      const entry = this.#entries[i]!;
      if (entry.state !== "acked" && entry.until <= now && !entry.attributes?.priority) return true;
    }
    return false;
  }

  /** Counts of the entries by state: one pass, O(window size). */
  summary(now: number): WindowSummary {
    const out: WindowSummary = { inFlight: 0, ready: 0, waiting: 0, redelivered: 0, oldest: undefined };
    for (const entry of this.entries()) {
      if (entry.state === "acked") continue;
      out.oldest ??= entry;
      if (entry.deliveries > 1) out.redelivered++;
      if (entry.until <= now) out.ready++;
      else if (entry.state === "leased") out.inFlight++;
      else out.waiting++;
    }
    return out;
  }

  /** Every entry, oldest first, then those taken ahead of the head (for a snapshot of the state). */
  *entries(): IterableIterator<WindowEntry> {
    for (let i = this.#head; i < this.#entries.length; i++) yield this.#entries[i]!;
    yield* this.#ahead.values();
  }

  /** Drops the oldest entries whose ack is written; returns the newest dropped (the floor moves after it). */
  dropAcked(): WindowEntry | undefined {
    let last: WindowEntry | undefined;
    while (this.#head < this.#entries.length) {
      const entry = this.#entries[this.#head]!;
      if (entry.state !== "acked" || !entry.persisted) break;
      this.#byKey.delete(entry.key);
      this.#head++;
      last = entry;
    }
    // Reclaim the dropped slots now and then (amortised O(1) per entry).
    if (this.#head > 1024 && this.#head * 2 > this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#base += this.#head;
      this.#head = 0;
    }
    return last;
  }
}
