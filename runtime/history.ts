/**
 * A fixed ring of samples: a time column and value columns, as Float32Arrays (rates and lags
 * need no more precision, and 1,000 queues x 300 points stay a few MB). Read out oldest first,
 * column by column, which is the shape uPlot draws.
 */
export class HistoryRing<Column extends string> {
  readonly #t: Float64Array;
  readonly #columns: Record<Column, Float32Array>;
  #next = 0;
  #size = 0;

  constructor(capacity: number, columns: readonly Column[]) {
    this.#t = new Float64Array(capacity);
    this.#columns = Object.fromEntries(columns.map((c) => [c, new Float32Array(capacity)])) as Record<Column, Float32Array>;
  }

  /** Adds a sample taken at `at` (ms since the epoch), dropping the oldest when full. */
  push(at: number, values: Record<Column, number>): void {
    const i = this.#next;
    this.#t[i] = at / 1000;
    for (const column in this.#columns) this.#columns[column][i] = values[column];
    this.#next = (i + 1) % this.#t.length;
    this.#size = Math.min(this.#size + 1, this.#t.length);
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

/** Three decimals: enough for rates, short in JSON. */
function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
