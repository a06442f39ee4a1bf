import { afterEach, describe, expect, it, vi } from "vitest";
import type { QueueDriver } from "../../src/driver";
import type { QueueProblem } from "../../src/errors";
import { QueueConsumer } from "../../src/consumer";
import { QueueWriter } from "../../src/writer";
import { INDEX_ENTRY_SIZE, readPartIndex } from "../../src/part-index";
import { appendToLog, logSize } from "../helpers/damage";
import type { EngineTestContext } from "./engine-suite";

/**
 * A queue's life on one driver: the part index, seeks by sequence and time, retention and the
 * missed messages it causes. Run by `describeEngineOnDriver`, so on every driver.
 */
export function describeLifeOnDriver(name: string, setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe(`a queue's life on ${name}`, () => {
    const open: { close(): Promise<void> }[] = [];
    const track = <T extends { close(): Promise<void> }>(x: T): T => (open.push(x), x);
    afterEach(async () => {
      vi.restoreAllMocks();
      for (const x of open.splice(0).reverse()) await x.close().catch(() => {});
    });
    const writer = async (driver: QueueDriver, options: Parameters<typeof QueueWriter.open>[1] = {}) => track(await QueueWriter.open("q", { driver, durability: "none", indexInterval: 10, ...options }));
    const consumer = async (driver: QueueDriver, consumerName = "c", options: Parameters<typeof QueueConsumer.open>[2] = {}) =>
      track(await QueueConsumer.open("q", consumerName, { driver, syncCommits: false, ...options }));
    const texts = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `m${from + i}`);

    it("indexes the first record, every indexInterval records, and the end when the part is sealed", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      for (let i = 0; i < 25; i++) await q.push(`m${i}`); // one batch each: entries come with the batch that reaches them
      const open = await readPartIndex(driver, "q", 0);
      expect(open!.map((e) => e.seq)).toEqual([1, 11, 21]);
      await q.close();
      const sealed = (await readPartIndex(driver, "q", 0))!;
      expect(sealed.map((e) => e.seq)).toEqual([1, 11, 21, 26]);
      expect(sealed.at(-1)!.offset).toBe(await logSize(driver, "q-0/q_queue"));
      // Each entry names the record it dates.
      const c = await consumer(driver);
      const all = await c.read({ max: 100 });
      for (const e of sealed.slice(0, -1)) expect(all[e.seq - 1]!.offset).toBe(e.offset);
      expect(sealed.every((e, i) => i === 0 || e.time >= sealed[i - 1]!.time)).toBe(true);
    });

    it("ignores a torn index tail, and the next writer cuts it off and indexes on", async () => {
      const ctx = await setup();
      let q = await writer(ctx.driver);
      await q.pushBatch(texts(15));
      await q.close();
      await appendToLog(ctx.driver, "q-0/q_index", new Uint8Array([1, 2, 3, 4, 5, 6, 7]));
      expect((await readPartIndex(ctx.driver, "q", 0))!.map((e) => e.seq)).toEqual([1, 11, 16]);
      q = await writer(ctx.reopen(), { rollOnOpen: false });
      expect(await logSize(ctx.driver, "q-0/q_index")).toBe(3 * INDEX_ENTRY_SIZE);
      await q.pushBatch(texts(10, 15));
      await q.close();
      expect((await readPartIndex(ctx.driver, "q", 0))!.map((e) => e.seq)).toEqual([1, 11, 16, 26]);
    });

    it("rebuilds the index of a part it recovers when the index is gone, and reports it", async () => {
      const ctx = await setup();
      const q = await writer(ctx.driver);
      await q.pushBatch(texts(23));
      await q.close();
      await ctx.driver.remove("q-0/q_index");
      const problems: QueueProblem[] = [];
      await writer(ctx.reopen(), { onProblem: (p) => problems.push(p) });
      expect(problems.map((p) => p.code)).toEqual(["NO_INDEX"]);
      expect((await readPartIndex(ctx.driver, "q", 0))!.map((e) => e.seq)).toEqual([1, 11, 21, 24]);
    });

    it("seeks to every message by part and sequence exactly, through the index", async () => {
      const { driver } = await setup();
      const q = await writer(driver, { indexInterval: 7, maxPartBytes: 1024 });
      const positions = await q.pushBatch(texts(80));
      const c = await consumer(driver);
      for (const [i, p] of positions.entries()) {
        await c.seek({ part: p.part, seq: p.seq });
        expect((await c.read({ max: 1 }))[0]!.data, `m${i}`).toBe(`m${i}`);
      }
      // The position after a part's last message is a place too; past it is none.
      const last = positions.filter((p) => p.part === 0).at(-1)!;
      await c.seek({ part: 0, seq: last.seq + 1 });
      expect((await c.read({ max: 1 }))[0]!.data).toBe(`m${last.seq}`);
      await expect(c.seek({ part: 0, seq: last.seq + 2 })).rejects.toMatchObject({ code: "E_CURSOR" });
    });

    it("seeks by time to the last indexed message before it: never later than the first message at or after it", async () => {
      const ctx = await setup();
      const now = vi.spyOn(Date, "now");
      now.mockReturnValue(1_000_000);
      let q = await writer(ctx.driver, { indexInterval: 5 });
      await q.pushBatch(texts(12)); // entries 1, 6, 11 at 1_000_000
      now.mockReturnValue(2_000_000);
      await q.pushBatch(texts(12, 12)); // entries 16, 21 at 2_000_000 (seq 13..24)
      await q.close(); // end entry (25) at 2_000_000
      now.mockReturnValue(3_000_000);
      q = await writer(ctx.reopen(), { indexInterval: 5 }); // part 1
      await q.pushBatch(texts(3, 24));
      now.mockRestore();
      const c = await consumer(ctx.driver);
      const first = async (time: number | Date) => {
        await c.seek({ time });
        return (await c.read({ max: 1 }))[0]?.data;
      };
      expect(await first(0)).toBe("m0");
      expect(await first(1_000_000)).toBe("m0");
      // m12 is the first message written at 2_000_000; the seek lands on seq 11 (m10), the last dated before.
      expect(await first(1_500_000)).toBe("m10");
      expect(await first(new Date(2_000_000))).toBe("m10");
      expect(await first(2_500_000)).toBe("m24"); // part 0 ended before: part 1
      expect(await first(3_000_000)).toBe("m24");
      await c.seek({ time: 9_000_000_000_000 });
      expect(await c.read()).toEqual([]); // at the end, as "latest"
      await expect(c.seek({ time: Number.NaN })).rejects.toMatchObject({ code: "E_CURSOR" });
    });
  });
}
