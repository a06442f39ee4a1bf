import { positionAfter, type ConsumerPosition } from "../../format/position";
import type { Message } from "../../format/message";
import { messageKey, type MessageKey } from "../state/shared-state";

/**
 * The messages of a shared consumer between its ack floor and its read head, oldest first:
 * what is leased, waiting to come again, or acknowledged out of order. Its length is capped
 * by the consumer (`maxAckWindow`), so its memory is too: each entry keeps its message's body
 * until it is acknowledged (then the body is dropped), to hand it out again without a re-read.
 */

export interface WindowEntry {
  key: MessageKey;
  /** Its number in the window: one more than the entry before it. */
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

  get size(): number {
    return this.#entries.length - this.#head;
  }

  get(key: MessageKey): WindowEntry | undefined {
    return this.#byKey.get(key);
  }

  /** Adds the next message read at the head. */
  add(message: Message, deliveries: number, acked: boolean): WindowEntry {
    const key = messageKey(message.part, message.offset);
    // Bytes are views into a 1 MiB read chunk: a copy, so a kept body does not keep the chunk.
    const kept = typeof message.data === "string" ? message : { ...message, data: message.data.slice() };
    const entry: WindowEntry = {
      key,
      n: this.#base + this.#entries.length,
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
    this.#entries.push(entry);
    this.#byKey.set(key, entry);
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
   * out now (ready, or leased past their time), up to `max`. O(window size).
   */
  scan(now: number, max: number): { live: number; available: WindowEntry[]; nextAt: number | undefined } {
    let live = 0;
    let nextAt: number | undefined;
    const available: WindowEntry[] = [];
    for (let i = this.#head; i < this.#entries.length; i++) {
      const entry = this.#entries[i]!;
      if (entry.state === "acked") continue;
      if (entry.until > now) {
        if (entry.state === "leased") live++;
        nextAt = nextAt === undefined ? entry.until : Math.min(nextAt, entry.until);
      } else if (available.length < max) available.push(entry);
    }
    return { live, available, nextAt };
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

  /** Every entry, oldest first (for a snapshot of the state). */
  *entries(): IterableIterator<WindowEntry> {
    for (let i = this.#head; i < this.#entries.length; i++) yield this.#entries[i]!;
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
