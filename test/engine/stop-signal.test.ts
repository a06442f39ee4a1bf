/**
 * The stop flag of long-lived objects (src/core/stop-signal.ts), a lost lock's `lost` among them:
 * each listener is called once, in order, even when one before it throws.
 */
import { describe, expect, it } from "vitest";
import { StopSignal } from "../../src/core/stop-signal";

describe("StopSignal", () => {
  it("calls every listener once, in order, even when one throws; then throws that error", () => {
    const signal = new StopSignal();
    const called: string[] = [];
    signal.addEventListener("abort", () => called.push("stop the writer"));
    signal.addEventListener("abort", () => {
      called.push("wake the waiters");
      throw new Error("a waiter failed");
    });
    signal.addEventListener("abort", () => called.push("count the lost lock"));
    expect(() => signal.abort(new Error("lost"))).toThrow("a waiter failed");
    expect(called).toEqual(["stop the writer", "wake the waiters", "count the lost lock"]);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as Error).message).toBe("lost");
    // Once: a second abort calls nobody and keeps the first reason.
    signal.abort(new Error("again"));
    expect(called).toHaveLength(3);
    expect((signal.reason as Error).message).toBe("lost");
  });

  it("a listener removed before the abort is not called; one added after it is not kept", () => {
    const signal = new StopSignal();
    const called: string[] = [];
    const removed = () => called.push("removed");
    signal.addEventListener("abort", removed);
    signal.removeEventListener("abort", removed);
    signal.abort();
    signal.addEventListener("abort", () => called.push("late"));
    expect(called).toEqual([]);
  });
});
