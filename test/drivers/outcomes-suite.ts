// Outcomes (consumers/shared/outcome-log.ts) on every driver: written by the holder, read by
// another driver instance on the same storage (as another process would), compacted, and
// continued by the next holder.
import { afterEach, describe, expect, it } from "vitest";
import { QueueWriter } from "../../src/writer/writer";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { followOutcomes, waitForOutcome } from "../../src/consumers/shared/outcomes";
import type { OutcomeEvent } from "../../src/consumers/types";
import type { EngineTestContext } from "./engine-suite";

export function outcomeTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe("outcomes", () => {
    const opened: { close(): Promise<void>; closed: boolean }[] = [];
    afterEach(async () => {
      for (const x of opened.splice(0).reverse()) if (!x.closed) await x.close().catch(() => {});
    });

    it("written by the holder, followed elsewhere, compacted to the newest, continued by the next holder", async () => {
      const { driver, reopen } = await setup();
      const writer = await QueueWriter.open("q", { driver, durability: "none" });
      await writer.pushBatch(Array.from({ length: 60 }, (_, i) => `m${i}`));
      await writer.close();
      const other = reopen();
      const stop = new AbortController();
      const seen: OutcomeEvent[] = [];
      const following = (async () => {
        for await (const event of followOutcomes("q", "s", { driver: other, from: "oldest", signal: stop.signal, pollIntervalMs: 20 })) seen.push(event);
      })();
      const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 1, outcomes: { keep: 10 }, onProblem: () => {} });
      opened.push(c);
      const leased = await c.poll({ max: 50 });
      await c.progress(leased[0]!, "half");
      await c.nack(leased[1]!, { error: "bad input" });
      for (const m of leased.slice(2)) await c.ack(m, { result: { offset: m.offset } });
      await c.close();
      // The next holder, on the other driver: ids go on, and an end is found there.
      const next = await SharedConsumer.open("q", "s", { driver: other, syncCommits: false, outcomes: { keep: 10 }, onProblem: () => {} });
      opened.push(next);
      const [last] = await next.poll({ max: 1 });
      await next.ack(last!, { result: "last" });
      expect(await waitForOutcome("q", "s", last!, { driver: other, timeoutMs: 10_000 })).toMatchObject({ kind: "completed", result: "last", id: 51 });
      expect(await waitForOutcome("q", "s", leased[1]!, { driver, timeoutMs: 0 })).toBeUndefined(); // compacted away
      const until = Date.now() + 10_000;
      while (seen.at(-1)?.id !== 51 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      stop.abort();
      await following;
      expect(seen.at(-1)).toMatchObject({ id: 51, result: "last" });
      expect(seen.every((e, i) => i === 0 || e.id > seen[i - 1]!.id)).toBe(true);
      const kept: OutcomeEvent[] = [];
      for await (const event of followOutcomes("q", "s", { driver: other, from: "oldest" })) if (kept.push(event) && event.id === 51) break;
      expect(kept.length).toBeGreaterThanOrEqual(10);
      expect(kept.length).toBeLessThanOrEqual(21);
    });
  });
}
