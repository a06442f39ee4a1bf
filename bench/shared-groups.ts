/**
 * The group mix of the shared-consumer bench (issue 40): the same number of messages as the plain
 * rows, spread over GROUPS groups (10,000 at full scale), each group the same number of messages
 * (10 at full scale) at places a seeded shuffle picks, as many customers' orders interleave. A body
 * is the same size as a plain one and starts with its group and its index ("123 45678 xxx..."), so
 * a drain can check that each group's messages went out in the order they were produced.
 */
import { seededRandom } from "./util";

/** One produce call: `count` messages from the `from`-th, all of one group. */
export interface GroupRun {
  from: number;
  count: number;
  group: string;
}

export class GroupMix {
  readonly groups: number;
  /** The group (0 to groups - 1) of each message. */
  readonly #groupOf: Uint16Array | Uint32Array;

  constructor(
    readonly messages: number,
    groups: number,
  ) {
    this.groups = Math.max(1, Math.min(groups, messages));
    this.#groupOf = this.groups <= 0xffff ? new Uint16Array(messages) : new Uint32Array(messages);
    for (let i = 0; i < messages; i++) this.#groupOf[i] = i % this.groups;
    // Fisher-Yates with a fixed seed: the same mix in every run and every row.
    const random = seededRandom(40);
    for (let i = messages - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      const t = this.#groupOf[i]!;
      this.#groupOf[i] = this.#groupOf[j]!;
      this.#groupOf[j] = t;
    }
  }

  groupOf(i: number): string {
    return `g${this.#groupOf[i]!}`;
  }

  /** The i-th message's body: its group and index, then `payload`'s filler up to its size. */
  bodyOf(i: number, payload: string): string {
    const head = `${this.#groupOf[i]!} ${i} `;
    return head + payload.slice(head.length);
  }

  /** The runs of one group among messages `from` to `to` (exclusive): a produce each. */
  runsOf(from: number, to: number): GroupRun[] {
    const runs: GroupRun[] = [];
    for (let i = from; i < to; i++) {
      const last = runs.at(-1);
      if (last && last.group === this.groupOf(i)) last.count++;
      else runs.push({ from: i, count: 1, group: this.groupOf(i) });
    }
    return runs;
  }
}

const decoder = new TextDecoder();

/** Counts messages handed out before an earlier message of their group (there should be none). */
export class GroupOrder {
  readonly #last: Int32Array;
  outOfOrder = 0;

  constructor(groups: number) {
    this.#last = new Int32Array(groups).fill(-1);
  }

  /** A message's body as a handler sees it: text, or bytes. */
  see(data: unknown): void {
    const text = typeof data === "string" ? data : data instanceof Uint8Array ? decoder.decode(data.subarray(0, 16)) : "";
    const space = text.indexOf(" ");
    const group = Number(text.slice(0, space));
    const index = Number(text.slice(space + 1, text.indexOf(" ", space + 1)));
    if (!(index > this.#last[group]!)) this.outOfOrder++;
    else this.#last[group] = index;
  }
}
