/**
 * A ring of samples (up to a capacity, grown as they come): a time column and value columns, as Float32Arrays (rates and lags
 * need no more precision, and 1,000 queues x 300 points stay a few MB). Read out oldest first,
 * column by column, which is the shape uPlot draws.
 */
export class HistoryRing<Column extends string> {
  readonly #capacity: number;
  #t: Float64Array;
  #columns: Record<Column, Float32Array>;
  #next = 0;
  #size = 0;

  constructor(capacity: number, columns: readonly Column[]) {
    this.#capacity = capacity;
    // Grown as samples come: the first sample of 10,000 consumers allocated 16 MB of zeros at once.
    const length = Math.min(capacity, FIRST_LENGTH);
    this.#t = new Float64Array(length);
    this.#columns = Object.fromEntries(columns.map((c) => [c, new Float32Array(length)])) as Record<Column, Float32Array>;
  }

  /** Adds a sample taken at `at` (ms since the epoch), dropping the oldest when full. */
  push(at: number, values: Record<Column, number>): void {
    if (this.#size === this.#t.length && this.#size < this.#capacity) this.#grow();
    const i = this.#next;
    this.#t[i] = at / 1000;
    for (const column in this.#columns) this.#columns[column][i] = values[column];
    this.#next = (i + 1) % this.#t.length;
    this.#size = Math.min(this.#size + 1, this.#t.length);
  }

  /** Twice as long (at most the capacity). Below the capacity the ring never wrapped: its samples are in order from 0. */
  #grow(): void {
    const length = Math.min(this.#capacity, this.#t.length * 2);
    const longer = <A extends Float32Array | Float64Array>(array: A, make: new (length: number) => A): A => {
      const out = new make(length);
      out.set(array);
      return out;
    };
    this.#t = longer(this.#t, Float64Array);
    for (const column in this.#columns) this.#columns[column] = longer(this.#columns[column], Float32Array);
    this.#next = this.#size;
  }

  /** The average of `column` over the last `points` samples (0 when empty). */
  mean(column: Column, points: number): number {
    const n = Math.min(points, this.#size);
    if (n === 0) return 0;
    let sum = 0;
    for (let k = 1; k <= n; k++) sum += this.#columns[column][(this.#next - k + this.#t.length) % this.#t.length]!;
    return sum / n;
  }

  /** The last `points` samples (all when fewer), oldest first: `t` in seconds since the epoch. */
  read(points: number): { t: number[] } & Record<Column, number[]> {
    const n = Math.max(0, Math.min(points, this.#size));
    const start = (this.#next - n + this.#t.length) % this.#t.length;
    const pick = (array: Float32Array | Float64Array) => Array.from({ length: n }, (_, k) => round(array[(start + k) % array.length]!));
    const out = { t: pick(this.#t) } as { t: number[] } & Record<Column, number[]>;
    for (const column in this.#columns) (out as Record<string, number[]>)[column] = pick(this.#columns[column]);
    return out;
  }
}

/** A ring's first length; it doubles up to its capacity as samples come. */
const FIRST_LENGTH = 8;

/** Three decimals: enough for rates, short in JSON. */
function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
