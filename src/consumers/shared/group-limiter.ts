import type { RateLimit } from "../../options/shared";
import { groupTakenLine, type GroupTakenCount } from "../state/shared-state";
import { TakeWindow } from "./limiter";

/**
 * A shared consumer's per-group rate limit (`groupLimiter: { max, durationMs }`): at most `max`
 * hand-outs of each group's messages in any `durationMs`, a sliding window per group, exact at
 * the consumer's holder (which makes every hand-out). Counted as the consumer's `limiter` is
 * (redeliveries count, releases are not given back). A group whose window is spent waits (its
 * head first: hand-out.ts skips the whole group), the others go on.
 *
 * Memory: a window only for the groups with hand-outs in the last `durationMs`. Groups are kept
 * in the order of their latest hand-out (moved to the end at each), so those whose window is
 * empty are at the front and leave there, O(1) per hand-out amortised, however many groups.
 * Their hand-outs are journal lines (`G`), for the next holder (a hand-over, a restart).
 */
export class GroupLimiter {
  readonly #limit: RateLimit | undefined;
  readonly #groups = new Map<string, TakeWindow>();
  /** Hand-outs of the running take, per group: written as one line each (`written`). */
  readonly #pending = new Map<string, number>();

  constructor(limit: RateLimit | undefined, loaded: readonly GroupTakenCount[]) {
    this.#limit = limit;
    if (!limit) return;
    for (const take of [...loaded].sort((a, b) => a.at - b.at)) this.#record(take.group, take.at, take.count);
    this.#sweep(Date.now());
  }

  /**
   * For `SharedWindow.scan` at `now`: when a group's window frees, while it is spent (undefined
   * when it may go out). Undefined itself with no limit (the scan asks nothing).
   */
  freeAt(now: number): ((group: string) => number | undefined) | undefined {
    if (!this.#limit) return undefined;
    return (group) => (this.budget(group, now) > 0 ? undefined : this.#groups.get(group)!.freeAt);
  }

  /** Hand-outs of `group` allowed now (Infinity with no limit). */
  budget(group: string, now: number): number {
    if (!this.#limit) return Infinity;
    const window = this.#groups.get(group);
    return window ? Math.max(0, this.#limit.max - window.spent(now)) : this.#limit.max;
  }

  /** Counts one hand-out of `group` at `now` (its line comes with the take's, `written`). */
  spend(group: string, now: number): void {
    if (!this.#limit) return;
    this.#record(group, now, 1);
    this.#pending.set(group, (this.#pending.get(group) ?? 0) + 1);
    this.#sweep(now);
  }

  /** The journal lines of the take's hand-outs, dated `at` (the latest: a restart sees them no earlier than they were). */
  written(at: number): string {
    let lines = "";
    for (const [group, count] of this.#pending) lines += groupTakenLine(at, count, group);
    this.#pending.clear();
    return lines;
  }

  /** What a snapshot keeps: the hand-outs still in their group's window. */
  lines(now: number): string {
    let lines = "";
    for (const [group, window] of this.#groups) for (const take of window.takes(now)) lines += groupTakenLine(take.at, take.count, group);
    return lines;
  }

  /** Groups with a window kept (those with hand-outs in the last `durationMs`, and a few more until swept). */
  get size(): number {
    return this.#groups.size;
  }

  #record(group: string, at: number, count: number): void {
    let window = this.#groups.get(group);
    // To the end: the map stays in the order of each group's latest hand-out.
    if (window) this.#groups.delete(group);
    else window = new TakeWindow(this.#limit!.durationMs);
    window.record(at, count);
    this.#groups.set(group, window);
  }

  /** Drops the groups whose window is empty at `now`: they are at the front. */
  #sweep(now: number): void {
    for (const [group, window] of this.#groups) {
      if ((window.emptyAt ?? 0) > now) break;
      this.#groups.delete(group);
    }
  }
}
