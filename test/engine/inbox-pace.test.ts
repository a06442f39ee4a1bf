/**
 * The pace of a holder's inbox reads (src/consumers/state/inbox-pace.ts): every INBOX_CHECK_MS
 * while nobody posts, every INBOX_BUSY_CHECK_MS for INBOX_BUSY_FOR_MS after a read found
 * something, so that another instance acking batch after batch waits a few ms for each verdict.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { INBOX_BUSY_CHECK_MS, INBOX_BUSY_FOR_MS, INBOX_CHECK_MS, readInboxAtPace } from "../../src/consumers/state/inbox-pace";

describe("inbox reads at the inbox pace", () => {
  beforeEach(() => void vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] }));
  afterEach(() => void vi.useRealTimers());

  /** Runs reads for `ms` with `found(n)` files at the n-th read (hurried at `hurryAt`); resolves with each read's time from the start. */
  async function readTimes(ms: number, found: (n: number) => number | Error, hurryAt?: number): Promise<number[]> {
    const start = Date.now();
    const times: number[] = [];
    const reads = readInboxAtPace(async () => {
      const files = found(times.length);
      times.push(Date.now() - start);
      if (files instanceof Error) throw files;
      return files;
    });
    if (hurryAt !== undefined) {
      await vi.advanceTimersByTimeAsync(hurryAt);
      reads.hurry();
    }
    await vi.advanceTimersByTimeAsync(ms - (hurryAt ?? 0));
    reads.stop();
    const count = times.length;
    await vi.advanceTimersByTimeAsync(10 * INBOX_CHECK_MS);
    expect(times).toHaveLength(count); // stopped: no read after
    return times;
  }

  it("reads every INBOX_CHECK_MS while it finds nothing", async () => {
    expect(await readTimes(2100, () => 0)).toEqual([500, 1000, 1500, 2000]);
  });

  it("after a read that found files, reads every INBOX_BUSY_CHECK_MS until INBOX_BUSY_FOR_MS passed without any", async () => {
    const times = await readTimes(5000, (n) => (n === 0 || n === 3 ? 1 : 0));
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // The busy reads: from the first read, until INBOX_BUSY_FOR_MS after the fourth (the last that found one).
    const lastFound = times[3]!;
    const busy = times.filter((t) => t > INBOX_CHECK_MS && t <= lastFound + INBOX_BUSY_FOR_MS);
    expect(busy.length).toBeGreaterThan(INBOX_BUSY_FOR_MS / INBOX_BUSY_CHECK_MS - 2);
    expect(gaps.slice(0, busy.length - 1).every((gap) => gap === INBOX_BUSY_CHECK_MS)).toBe(true);
    // Then the idle pace again.
    expect(gaps.slice(busy.length)).toEqual(gaps.slice(busy.length).map(() => INBOX_CHECK_MS));
    expect(gaps.slice(busy.length).length).toBeGreaterThan(0);
  });

  it("hurried (its holder asked to hand over), reads at once, then at the busy pace for INBOX_BUSY_FOR_MS", async () => {
    const times = await readTimes(4000, () => 0, 700);
    expect(times.slice(0, 3)).toEqual([500, 700, 700 + INBOX_BUSY_CHECK_MS]);
    const busy = times.filter((t) => t >= 700 && t < 700 + INBOX_BUSY_FOR_MS);
    expect(busy).toEqual(busy.map((_, i) => 700 + i * INBOX_BUSY_CHECK_MS));
    expect(busy.length).toBe(INBOX_BUSY_FOR_MS / INBOX_BUSY_CHECK_MS);
    const after = times.filter((t) => t >= 700 + INBOX_BUSY_FOR_MS);
    expect(after.slice(1).map((t, i) => t - after[i]!)).toEqual(after.slice(1).map(() => INBOX_CHECK_MS));
  });

  it("a failed read is tried again at the idle pace", async () => {
    expect(await readTimes(1600, () => new Error("EIO"))).toEqual([500, 1000, 1500]);
  });
});
