/** The chaos harness itself: its short run meets every fault on every instance (checked on stand-ins, with fake timers). */
import { afterEach, describe, expect, it, vi } from "vitest";
import { chaosLoop, expectEveryInstanceKilledAndPaused, type Instance } from "../helpers/multi-instance";

const standIn = (): Instance => ({
  url: "",
  fencedBefore: { storage: 0, lease: 0 },
  restart: async () => {},
  kill: () => {},
  fencedWrites: async () => ({ storage: 0, lease: 0 }),
});

describe("chaosLoop", () => {
  afterEach(() => vi.useRealTimers());

  it.each([1, 2, 3, 4])("with %i instances, the short run kills each once and pauses each once", async (count) => {
    vi.useFakeTimers();
    const run = chaosLoop(Array.from({ length: count }, standIn), { runMs: 0, pauseMs: 1000 });
    await vi.advanceTimersByTimeAsync(60_000);
    const faults = await run;
    expectEveryInstanceKilledAndPaused(faults);
    expect(faults).toMatchObject({ kills: count, pauses: count });
  });
});
