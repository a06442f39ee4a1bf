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
import type { MessageAttributes } from "../../format/attributes";
import type { WindowEntry } from "./window";

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
  readonly #resume = new Map<string, ConsumerPosition>();

  constructor(driver: QueueDriver, queue: string, name: string, options: PartReaderOptions) {
    this.index = new AttributeIndex(driver, queue);
    this.#reader = new PartReader(queue, name, driver, options);
  }

  /**
   * Up to `room` messages of a priority after `head` that `isKnown` does not know yet (tracked
   * already), highest priority first.
   */
  async fetch(head: ConsumerPosition, room: number, isKnown: (message: Message) => boolean): Promise<AheadMessage[]> {
    const out: AheadMessage[] = [];
    if (room <= 0) return out;
    const runs = await this.index.ahead(head);
    const live = new Set<string>();
    for (const ahead of runs) {
      const id = runId(ahead);
      live.add(id);
      if (out.length >= room) continue;
      const { part, run } = ahead;
      // A group's order wins over a priority: its earlier messages may not be read yet.
      if (run.attributes.group !== undefined) continue;
      const from = this.#resume.get(id) ?? { part, position: run.offset, count: run.seq - 1 };
      const left = run.seq + run.count - 1 - from.count;
      if (left <= 0) continue;
      await this.#reader.openAt(from);
      const messages = await this.#reader.read(left, Infinity, true, false);
      // Its first record is not the one the run names (a write a crash cut short): it names none.
      if (from.count === run.seq - 1 && messages[0] !== undefined && messages[0].crc !== run.crc) {
        this.#resume.set(id, { part, position: Infinity, count: run.seq + run.count });
        continue;
      }
      for (const message of messages) {
        if (out.length >= room) break;
        this.#resume.set(id, positionAfter(message));
        if ((part === head.part && message.seq <= head.count) || isKnown(message)) continue;
        out.push({ message, attributes: run.attributes });
      }
    }
    for (const id of this.#resume.keys()) if (!live.has(id)) this.#resume.delete(id);
    return out;
  }

  close(): Promise<void> {
    return this.index.close();
  }
}

function runId({ part, run }: AheadRun): string {
  return `${part}:${run.seq}`;
}

/** Compares entries by position: part, then offset. */
function byPosition(a: WindowEntry, b: WindowEntry): number {
  return a.part - b.part || a.offset - b.offset;
}

/**
 * The order in which `available` go out: highest priority first, then oldest; every
 * `FAIR_EVERY`-th hand-out (counted by `handedOut`) the oldest of all instead.
 */
export function priorityOrder(available: readonly WindowEntry[], handedOut: number): WindowEntry[] {
  const oldest = [...available].sort(byPosition);
  const ranked = [...available].sort((a, b) => (b.attributes?.priority ?? 0) - (a.attributes?.priority ?? 0) || byPosition(a, b));
  const out: WindowEntry[] = [];
  const taken = new Set<WindowEntry>();
  let r = 0;
  let o = 0;
  for (let turn = handedOut; out.length < available.length; turn++) {
    const fair = (turn + 1) % FAIR_EVERY === 0;
    let next: WindowEntry | undefined;
    if (fair) while (o < oldest.length && taken.has((next = oldest[o++]!))) next = undefined;
    if (!next) while (r < ranked.length && taken.has((next = ranked[r++]!))) next = undefined;
    if (!next) break;
    taken.add(next);
    out.push(next);
  }
  return out;
}
