/**
 * Priorities of a shared consumer (docs/work-queues.md#priorities): messages produced with a
 * `priority` above 0 are leased before lower ones, those of one priority oldest first. The ones
 * ahead of the read head are found in the queue's attribute runs (attributes.ts) and read by
 * position, so that a high one goes out at the next poll, however long the backlog before it.
 * No message waits forever: every `FAIR_EVERY`-th hand-out of a consumer goes to the oldest
 * message that may go out, whatever its priority.
 */
import type { Message } from "../../format/message";
import { positionAfter, type ConsumerPosition } from "../../format/position";
import type { QueueDriver } from "../../core/driver";
import { PartReader, type PartReaderOptions } from "../../log/part-reader";
import { AttributeIndex, type AheadRun } from "./attributes";
import type { AttributeRun, MessageAttributes } from "../../format/attributes";
import type { WindowEntry } from "./window";

/** The chunk a run ahead of the head is read with: most runs are a few records, far apart (about a chunk each). */
const AHEAD_CHUNK_BYTES = 4 * 1024;

/** One hand-out in this many goes to the oldest message, whatever its priority. */
export const FAIR_EVERY = 10;

/** A message of a priority read ahead of the head, with its attributes. */
export interface AheadMessage {
  message: Message;
  attributes: MessageAttributes;
}

export class PriorityAhead {
  readonly index: AttributeIndex;
  readonly #reader: PartReader;
  /** Where to read a run on from (its first record's position at first; the record after the last one looked at). */
  readonly #resume = new Map<AttributeRun, ConsumerPosition>();
  /** Runs looked at to their end (the index keeps the same objects until their part is passed). */
  readonly #done = new WeakSet<AttributeRun>();
  /** The index's list as last seen, and where its runs not done begin. */
  #runs: readonly AheadRun[] = [];
  #start = 0;

  constructor(driver: QueueDriver, queue: string, name: string, options: PartReaderOptions) {
    this.index = new AttributeIndex(driver, queue);
    // Runs are read where they are, a few records each: small chunks, not the head's 1 MiB ones,
    // and the reader moves from run to run of a part without opening it again (`moveTo`).
    this.#reader = new PartReader(queue, name, driver, { ...options, readChunkBytes: Math.min(options.readChunkBytes, AHEAD_CHUNK_BYTES) });
  }

  /**
   * Up to `room` messages of a priority after `head` that `isKnown` does not know yet (tracked
   * already), highest priority first. Runs looked at to their end are passed over from then on,
   * so a take costs what it hands out, not every run ahead.
   */
  async fetch(head: ConsumerPosition, room: number, isKnown: (message: Message) => boolean): Promise<AheadMessage[]> {
    const out: AheadMessage[] = [];
    if (room <= 0) return out;
    const runs = await this.index.ahead(head);
    if (runs !== this.#runs) [this.#runs, this.#start] = [runs, 0];
    for (let i = this.#start; i < runs.length && out.length < room; i++) {
      const ahead = runs[i]!;
      const { part, run } = ahead;
      const from = this.#done.has(run) ? undefined : (this.#resume.get(run) ?? { part, position: run.offset, count: run.seq - 1 });
      // Done: read to its end, passed by the head, or a group's (a group's order wins over a priority: its earlier messages may not be read yet).
      if (!from || part < head.part || (part === head.part && run.seq + run.count - 1 <= head.count) || run.attributes.group !== undefined) {
        this.#finish(run);
        if (i === this.#start) this.#start++;
        continue;
      }
      await this.#reader.moveTo(from);
      const messages = await this.#reader.read(run.seq + run.count - 1 - from.count, Infinity, true, false);
      // Its first record is not the one the run names (a write a crash cut short): it names none.
      if (from.count === run.seq - 1 && messages[0] !== undefined && messages[0].crc !== run.crc) {
        this.#finish(run);
        continue;
      }
      for (const message of messages) {
        if (out.length >= room) break;
        this.#resume.set(run, positionAfter(message));
        if (message.seq === run.seq + run.count - 1) this.#finish(run);
        if ((part === head.part && message.seq <= head.count) || isKnown(message)) continue;
        out.push({ message, attributes: run.attributes });
      }
    }
    return out;
  }

  #finish(run: AttributeRun): void {
    this.#done.add(run);
    this.#resume.delete(run);
  }

  async close(): Promise<void> {
    await Promise.all([this.index.close(), this.#reader.close()]);
  }
}

/**
 * The first `want` of `available` in the order they go out: highest priority first, then
 * oldest; every `FAIR_EVERY`-th hand-out (counted by `handedOut`) the oldest of all instead.
 * O(available): by priority level, no sort (`available` is in position order already: the
 * window's entries, then those ahead of the head, after them all).
 */
export function priorityOrder(available: readonly WindowEntry[], handedOut: number, want: number): WindowEntry[] {
  const levels = new Map<number, WindowEntry[]>();
  for (const entry of available) {
    const level = entry.attributes?.priority ?? 0;
    const list = levels.get(level);
    if (list) list.push(entry);
    else levels.set(level, [entry]);
  }
  const ranked = [...levels.keys()].sort((a, b) => b - a).map((level) => levels.get(level)!);
  const out: WindowEntry[] = [];
  const taken = new Set<WindowEntry>();
  let level = 0;
  let at = 0;
  let o = 0;
  for (let turn = handedOut; out.length < want && out.length < available.length; turn++) {
    let next: WindowEntry | undefined;
    if ((turn + 1) % FAIR_EVERY === 0) while (o < available.length && taken.has((next = available[o++]!))) next = undefined;
    while (!next && level < ranked.length) {
      const list = ranked[level]!;
      if (at >= list.length) [level, at] = [level + 1, 0];
      else if (!taken.has((next = list[at++]!))) break;
      else next = undefined;
    }
    if (!next) break;
    taken.add(next);
    out.push(next);
  }
  return out;
}
