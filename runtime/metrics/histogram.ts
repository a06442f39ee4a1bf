/**
 * A Prometheus histogram as a fixed array of buckets: an observation is a short scan and three
 * additions, no allocation (the hot path: every request, every append, every fsync).
 */
export class Histogram {
  /** Upper bounds (`le`), ascending; the +Inf bucket is the last count. */
  readonly bounds: readonly number[];
  /** Observations per bucket, not cumulative (the exposition adds them up). */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  constructor(bounds: readonly number[]) {
    this.bounds = bounds;
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** Request latency, seconds: 1 ms to a minute (a long poll waits up to `maxTimeoutMs`). */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** fsync, seconds: 50 µs (memory, cache) to 5 s (a saturated disk). */
export const FSYNC_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];
/** Bytes of one append (a write batch): 64 B to 16 MiB. */
export const BYTES_BUCKETS = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216];
/** Messages of one produce request. */
export const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000];
