/**
 * The priority mix of the shared-consumer bench (issue 40): the same messages as the plain rows,
 * of which every 100 are 90 at priority 0, then 10 at one priority of 1..9, in turn (so 10 % of
 * the queue spread evenly over 1..9, in runs as a producer of urgent work among routine work
 * would write them). A message of a priority above 0 starts with "p" instead of "x" (same size),
 * so that a drain can count how early the urgent ones went out: without priorities the first
 * tenth of a drain holds about 10 % of them, with priorities most of it.
 */

/** Messages per turn: `URGENT` of them at the end of each have a priority above 0. */
const TURN = 100;
const URGENT = 10;
/** The priorities above 0, in turn: 1..9. */
const LEVELS = 9;

/** The v-queue priority (0-255, higher first) of the i-th message produced. */
export function priorityOf(i: number): number {
  return i % TURN < TURN - URGENT ? 0 : 1 + (Math.floor(i / TURN) % LEVELS);
}

/**
 * BullMQ's priority for the same message: 1 is its highest, and jobs without one go before all
 * prioritized ones, so priority 0 becomes its lowest used level (10) and p becomes 10 - p.
 */
export function bullmqPriorityOf(i: number): number {
  return LEVELS + 1 - priorityOf(i);
}

/** The body of the i-th message: `payload`, its first character "p" when it has a priority. */
export function bodyOf(i: number, payload: string): string {
  return priorityOf(i) === 0 ? payload : `p${payload.slice(1)}`;
}

/** One produce call: `count` messages from the `from`-th, all of one priority. */
export interface PriorityRun {
  from: number;
  count: number;
  priority: number;
}

/** The runs of one priority among messages `from` to `to` (exclusive): a produce each. */
export function runsOf(from: number, to: number): PriorityRun[] {
  const runs: PriorityRun[] = [];
  for (let i = from; i < to; i++) {
    const last = runs.at(-1);
    if (last && last.priority === priorityOf(i)) last.count++;
    else runs.push({ from: i, count: 1, priority: priorityOf(i) });
  }
  return runs;
}

/** Counts the marked (priority above 0) messages among the first tenth of a drain's `total`. */
export class EarlyShare {
  readonly #first: number;
  #seen = 0;
  #marked = 0;

  constructor(total: number) {
    this.#first = Math.max(1, Math.floor(total / 10));
  }

  /** A message's body as a handler sees it: text, or bytes. */
  see(data: unknown): void {
    if (this.#seen >= this.#first) return;
    this.#seen++;
    const first = typeof data === "string" ? data.charCodeAt(0) : data instanceof Uint8Array ? data[0] : undefined;
    if (first === 0x70) this.#marked++;
  }

  /** The share of messages of a priority among the first tenth (0 to 1). */
  get share(): number {
    return this.#seen === 0 ? Number.NaN : this.#marked / this.#seen;
  }
}
