import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { ConsumerSlot } from "../../runtime/consumer-slot";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";

/** Entries Node keeps on a signal for each `AbortSignal.any` that follows it (0 when there is no such set). */
function dependants(signal: AbortSignal): number {
  const key = Object.getOwnPropertySymbols(signal).find((s) => s.description === "kDependantSignals");
  return key ? ((signal as unknown as Record<symbol, Set<unknown> | undefined>)[key]?.size ?? 0) : 0;
}

describe("ConsumerSlot", () => {
  it("leaves nothing behind on a long-lived signal over many polls (no listener, no dependant)", async () => {
    const driver = memoryDriver({});
    const writer = await QueueWriter.open("q", { driver, durability: "none" });
    await writer.pushBatch(Array.from({ length: 300 }, (_, i) => `m${i}`));
    const slot = new ConsumerSlot(await QueueConsumer.open("q", "c", { driver, create: true }));
    const caller = new AbortController();
    try {
      let read = 0;
      // Half with messages there, half waiting (briefly) for none.
      for (let i = 0; i < 600; i++) {
        read += (await slot.poll({ max: 1, maxBytes: 1 << 20, timeoutMs: i < 300 ? 1000 : 0, signal: caller.signal })).length;
      }
      expect(read).toBe(300);
      expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
      expect(dependants(caller.signal)).toBe(0);
    } finally {
      await slot.stop("closed");
      await writer.close();
    }
  });

  it("ends a wait when the caller's signal aborts, and when the slot stops", async () => {
    const driver = memoryDriver({});
    const writer = await QueueWriter.open("q", { driver, durability: "none" });
    const slot = new ConsumerSlot(await QueueConsumer.open("q", "c", { driver, create: true }));
    try {
      const caller = new AbortController();
      let started = performance.now();
      const waiting = slot.poll({ max: 1, maxBytes: 1 << 20, timeoutMs: WAKE_TIMEOUT_MS, signal: caller.signal });
      setTimeout(() => caller.abort(), 20);
      expect(await waiting).toEqual([]);
      expectEndedEarly(started);
      started = performance.now();
      const stopped = slot.poll({ max: 1, maxBytes: 1 << 20, timeoutMs: WAKE_TIMEOUT_MS });
      setTimeout(() => void slot.stop("closed"), 20);
      expect(await stopped).toEqual([]);
      expectEndedEarly(started);
    } finally {
      await slot.stop("closed");
      await writer.close();
    }
  });
});
