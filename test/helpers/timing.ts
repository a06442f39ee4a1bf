import { expect } from "vitest";

/**
 * Time in tests: a test asserts what happened, never how fast (speed belongs in the benchmarks).
 * Where a timeout is the behaviour (a long poll that a push or a close ends early, a lease), the
 * test gives that timeout room and checks the wait ended well before it, or ended by it: bounds
 * that hold at a load average of 4 on 2 cores (CI runs 3 files at once on 2 cores).
 */

/** A wait that something else should end early: long enough that "ended by its timeout" is never mistaken for "ended early" on a loaded machine. */
export const WAKE_TIMEOUT_MS = 20_000;

/** What a loaded machine may add to a timer, a request or a process exit. */
export const LOAD_SLACK_MS = 5_000;

/** The wait begun at `startedAt` (a `performance.now()`) ended early, not by its `timeoutMs`: in less than half of it. */
export function expectEndedEarly(startedAt: number, timeoutMs: number = WAKE_TIMEOUT_MS): void {
  const elapsed = performance.now() - startedAt;
  expect(elapsed, `ended after ${Math.round(elapsed)} ms of its ${timeoutMs} ms timeout: by the timeout, not by what should end it`).toBeLessThan(
    timeoutMs / 2,
  );
}

/** The wait begun at `startedAt` (a `performance.now()`) ended by its own `timeoutMs`: not before it, and not stuck past it. */
export function expectEndedByTimeout(startedAt: number, timeoutMs: number): void {
  const elapsed = performance.now() - startedAt;
  // Timers may fire up to a millisecond early against performance.now().
  expect(elapsed, "ended before its timeout").toBeGreaterThanOrEqual(timeoutMs - 2);
  expect(elapsed, `still waiting ${Math.round(elapsed - timeoutMs)} ms after its ${timeoutMs} ms timeout`).toBeLessThan(timeoutMs + LOAD_SLACK_MS);
}
