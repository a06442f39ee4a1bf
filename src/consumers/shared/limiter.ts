import type { RateLimit } from "../../options/shared";
import { backOffLine, takenLine, type TakenCount } from "../state/shared-state";

/**
 * Hand-outs within a sliding window of `durationMs`: one entry per take (its time and count),
 * so it costs O(takes in the window). Takes close together (within a 1024th of the window) are
 * one entry, dated by the latest: its earlier hand-outs leave the window a little late (more
 * limited, never less), and a long window with many small takes keeps about 1024 entries.
 */
export class TakeWindow {
  readonly #durationMs: number;
  /** Takes within the window, oldest first (from `#head`). */
  readonly #takes: TakenCount[] = [];
  #head = 0;
  /** Hand-outs in `#takes` from `#head`. */
  #spent = 0;

  constructor(durationMs: number) {
    this.#durationMs = durationMs;
  }

  /** Hand-outs within the window ending at `now` (those before it leave). */
  spent(now: number): number {
    this.#expire(now);
    return this.#spent;
  }

  /** When the oldest take leaves the window (undefined when it is empty). */
  get freeAt(): number | undefined {
    return this.#head < this.#takes.length ? this.#takes[this.#head]!.at + this.#durationMs : undefined;
  }

  /** When the newest take leaves the window (undefined when it is empty): then it is empty. */
  get emptyAt(): number | undefined {
    return this.#head < this.#takes.length ? this.#takes.at(-1)!.at + this.#durationMs : undefined;
  }

  record(at: number, count: number): void {
    const last = this.#takes.length > this.#head ? this.#takes.at(-1)! : undefined;
    if (last && at >= last.at && at - last.at <= Math.floor(this.#durationMs / 1024)) {
      last.at = at;
      last.count += count;
    } else this.#takes.push({ at, count });
    this.#spent += count;
  }

  /** The takes still in the window at `now`, oldest first. */
  takes(now: number): TakenCount[] {
    this.#expire(now);
    return this.#takes.slice(this.#head);
  }

  #expire(now: number): void {
    const from = now - this.#durationMs;
    while (this.#head < this.#takes.length && this.#takes[this.#head]!.at <= from) this.#spent -= this.#takes[this.#head++]!.count;
    // Compacted now and then: the array does not grow with every take ever made.
    if (this.#head > 1024 && this.#head * 2 > this.#takes.length) {
      this.#takes.splice(0, this.#head);
      this.#head = 0;
    }
  }
}

/**
 * A shared consumer's rate limit (`limiter: { max, durationMs }`) and back-off, kept where
 * leases are made (hand-out.ts): a sliding window of hand-outs (`TakeWindow`), exact (at most
 * `max` in any `durationMs`). Every hand-out counts, a redelivery as a first delivery: the limit
 * guards what the handlers call (an API's rate), and a redelivery calls it as much. A released
 * lease is not given back. Its hand-outs (`T` lines) and back-off (`P`) are journal lines, so
 * that the next holder of the consumer (a hand-over between instances, a restart) goes on with
 * the same window.
 */
export class RateLimiter {
  readonly #limit: RateLimit | undefined;
  readonly #window: TakeWindow | undefined;
  #pausedUntil = 0;

  constructor(limit: RateLimit | undefined, loaded: { taken: readonly TakenCount[]; pausedUntil: number }) {
    this.#limit = limit;
    this.#pausedUntil = loaded.pausedUntil;
    this.#window = limit && new TakeWindow(limit.durationMs);
    if (limit) for (const take of [...loaded.taken].sort((a, b) => a.at - b.at)) this.#window!.record(take.at, take.count);
  }

  /** The end of the back-off (ms since the epoch; in the past when none runs). */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /** Hand-outs allowed now: 0 while backing off or while the window is spent (Infinity with no limit). */
  budget(now: number): number {
    if (now < this.#pausedUntil) return 0;
    if (!this.#limit) return Infinity;
    return Math.max(0, this.#limit.max - this.#window!.spent(now));
  }

  /** While nothing may go out: when that may change (the back-off's end, or the oldest take's leaving the window). */
  limitedUntil(now: number): number | undefined {
    if (this.budget(now) > 0) return undefined;
    if (now < this.#pausedUntil) return this.#pausedUntil;
    return this.#window!.freeAt;
  }

  /** Counts `count` hand-outs at `now`: the journal line that keeps them ("" with no limit). */
  spend(now: number, count: number): string {
    if (!this.#limit || count === 0) return "";
    this.#window!.record(now, count);
    return takenLine(now, count);
  }

  /** Nothing goes out before `until` (a later back-off already running is kept): the journal line that keeps it. */
  backOff(until: number): string {
    this.#pausedUntil = Math.max(this.#pausedUntil, until);
    return backOffLine(this.#pausedUntil);
  }

  /** What a snapshot keeps of it: the takes still in the window and a back-off still running. */
  lines(now: number): string {
    let lines = now < this.#pausedUntil ? backOffLine(this.#pausedUntil) : "";
    if (!this.#window) return lines;
    for (const take of this.#window.takes(now)) lines += takenLine(take.at, take.count);
    return lines;
  }
}
