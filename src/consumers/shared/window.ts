import { comparePositions, positionAfter, type ConsumerPosition } from "../../format/position";
import type { Message } from "../../format/message";
import { messageKey, type MessageKey } from "../state/shared-state";
import type { MessageAttributes } from "../../format/attributes";

/**
 * The messages of a shared consumer between its ack floor and its read head, oldest first:
 * what is leased, waiting to come again, or acknowledged out of order. Its length is capped
 * by the consumer (`maxAckWindow`), so its memory is too: each entry keeps its message's body
 * until it is acknowledged (then the body is dropped), to hand it out again without a re-read.
 */

/** At most this many entries never handed out may be passed by the high-water mark at one hand-out (`passMark`). */
const MAX_PASSED = 16;

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
  /** Its group's entries in the window (set once the head read it; those taken ahead have no group, priority.ts). */
  groupLine?: GroupLine | undefined;
  /** The next entry of its group in the window. */
  groupNext?: WindowEntry | undefined;
}

/**
 * The entries of one group in the window, oldest first, linked by `groupNext`: whether an entry
 * is among its group's `groupLimit` oldest not acknowledged is a look at the line's start, not a
 * count over the window. No array per group: most groups have one or two entries in the window.
 */
interface GroupLine {
  readonly group: string;
  /** The oldest entry whose ack may not be written yet (those before it are written: final). */
  first: WindowEntry | undefined;
  last: WindowEntry;
}

/**
 * Whether `entry` is among its line's `limit` oldest whose ack is not written. An ack on its way
 * holds its turn: if its write fails the message comes back, and goes before the rest of its
 * group (the consumer wakes the polls once it is written). O(limit + written acks inside the line).
 */
function hasTurn(line: GroupLine, entry: WindowEntry, limit: number): boolean {
  let next = line.first;
  while (next !== undefined && next.persisted) next = next.groupNext;
  line.first = next;
  for (let before = 0; next !== undefined; next = next.groupNext) {
    if (next === entry) return before < limit;
    if (!next.persisted && ++before >= limit) return false;
  }
  return false;
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
  /** Entries numbered below this are below the high-water mark, handed out, or acknowledged (`passMark`). */
  #marked = 0;
  readonly #byKey = new Map<MessageKey, WindowEntry>();
  /** Messages of a priority taken ahead of the read head (hand-out.ts): in the window's order once the head reads them. */
  readonly #ahead = new Map<MessageKey, WindowEntry>();
  /** A message of a priority was tracked once: `topPriority` has something to look for. */
  #prioritized = false;
  /** The groups of the entries in the window, each its entries in order. */
  readonly #groups = new Map<string, GroupLine>();

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
    const group = attributes?.group;
    if (group !== undefined) {
      const line = this.#groups.get(group);
      if (!line) this.#groups.set(group, (entry.groupLine = { group, first: entry, last: entry }));
      else {
        line.last.groupNext = entry;
        line.last = entry;
        line.first ??= entry;
        entry.groupLine = line;
      }
    }
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
      // Every field from the start: entries of one shape keep the window's loops monomorphic.
      acking: undefined,
      error: undefined,
      firstAt: undefined,
      attributes,
      groupLine: undefined,
      groupNext: undefined,
    };
    if (attributes?.priority) this.#prioritized = true;
    return entry;
  }

  /**
   * Before the first hand-out of `entry`: whether the high-water mark (the journal's is `mark`)
   * may move to after it, so that the mark counts its hand-out. It may unless it is below the
   * mark already, or more than `MAX_PASSED` entries between the mark and it were never handed
   * out (a message of a priority far ahead, say: then it gets a line of its own). Those few are
   * given to `passed`: the journal writes a count of 0 for each, before the mark, so that the
   * mark does not count them. Amortised O(1) and O(MAX_PASSED).
   */
  passMark(entry: WindowEntry, mark: ConsumerPosition | undefined, passed: (entry: WindowEntry) => void): boolean {
    if (entry.n < 0) return false;
    const entries = this.#entries;
    const last = entry.n - this.#base;
    let i = Math.max(this.#marked - this.#base, this.#head);
    // Passed already: handed out, acknowledged and written, or below the journal's mark (a restart's).
    for (; i < entries.length; i++) {
      const next = entries[i]!;
      if (next.deliveries === 0 && !next.persisted && !(mark && comparePositions(next.end, mark) <= 0)) break;
    }
    this.#marked = this.#base + i;
    if (last < i) return false;
    let waiting = 0;
    for (let j = i; j < last; j++) if (entries[j]!.deliveries === 0 && !entries[j]!.persisted && ++waiting > MAX_PASSED) return false;
    for (let j = i; j < last; j++) if (entries[j]!.deliveries === 0 && !entries[j]!.persisted) passed(entries[j]!);
    this.#marked = entry.n + 1;
    return true;
  }

  /**
   * One pass from the oldest: the leases still running, and the entries that may be handed
   * out now (ready, or leased past their time), up to `max`; of a group, only those among its
   * `groupLimit` oldest whose ack is not written (docs/work-queues.md#groups), and none of a group
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
    const visit = (entry: WindowEntry) => {
      if (entry.state === "acked") return;
      if (entry.until > now) {
        if (entry.state === "leased") live++;
        nextAt = nextAt === undefined ? entry.until : Math.min(nextAt, entry.until);
        return;
      }
      const line = entry.groupLine;
      const group = line?.group;
      if (line === undefined || hasTurn(line, entry, groupLimit)) {
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
      const line = entry.groupLine;
      if (line !== undefined) {
        // Dropped in window order, so in its group's order: the line's first (or passed by it already).
        if (line.first === entry) line.first = entry.groupNext;
        // Its last: the line is empty (a line is made only while the map holds none for its group).
        if (line.last === entry) this.#groups.delete(line.group);
        entry.groupNext = undefined;
      }
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
