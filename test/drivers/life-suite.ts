// Over 300 lines: one suite per driver for the index, seeks, retention and missed messages; its
// cases share the setup and helpers (partsOfTen, texts) and run on every driver from one place.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { encodeEntries, INDEX_ENTRY_SIZE, readPartIndex } from "../../src/log/part-index";
import { appendToLog, logSize, patchLog } from "../helpers/damage";
import { pruneQueue } from "../../src/retention/prune";
import { listParts } from "../../src/log/recovery";
import { partDir, partPath } from "../../src/storage/paths";
import type { EngineTestContext } from "./engine-suite";
import { sleep } from "../helpers/sleep";

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
    const writer = async (driver: QueueDriver, options: Parameters<typeof QueueWriter.open>[1] = {}) =>
      track(await QueueWriter.open("q", { driver, durability: "none", indexInterval: 10, ...options }));
    const consumer = async (driver: QueueDriver, consumerName = "c", options: Parameters<typeof QueueConsumer.open>[2] = {}) =>
      track(await QueueConsumer.open("q", consumerName, { driver, syncCommits: false, ...options }));
    /** m000, m001, ...: one size, so that parts of ten are 290 bytes. */
    const texts = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `m${String(from + i).padStart(3, "0")}`);

    it("indexes the first record, every indexInterval records, and the end when the part is sealed", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      for (const text of texts(25)) await q.push(text); // one batch each: entries come with the batch that reaches them
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

    it("rebuilds the index of a part it recovers when the index is gone (quietly) or damaged (reported)", async () => {
      const ctx = await setup();
      let q = await writer(ctx.driver);
      await q.pushBatch(texts(23));
      await q.close();
      await ctx.driver.remove("q-0/q_index");
      const problems: QueueProblem[] = [];
      q = await writer(ctx.reopen(), { onProblem: (p) => problems.push(p), rollOnOpen: false });
      expect(problems).toEqual([]);
      await q.close();
      expect((await readPartIndex(ctx.driver, "q", 0))!.map((e) => e.seq)).toEqual([1, 11, 21, 24]);
      await patchLog(ctx.driver, "q-0/q_index", [[INDEX_ENTRY_SIZE + 3, new Uint8Array([0xff])]]); // entry 2 of 4 flipped
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
        expect((await c.read({ max: 1 }))[0]!.data).toBe(texts(1, i)[0]);
      }
      // The position after a part's last message is a place too; past it is none.
      const last = positions.filter((p) => p.part === 0).at(-1)!;
      await c.seek({ part: 0, seq: last.seq + 1 });
      expect((await c.read({ max: 1 }))[0]!.data).toBe(texts(1, last.seq)[0]);
      await expect(c.seek({ part: 0, seq: last.seq + 2 })).rejects.toMatchObject({ code: "E_CURSOR" });
      // A damaged entry in the middle: the entries before it, then a longer scan; still exact.
      await patchLog(driver, "q-0/q_index", [[2 * INDEX_ENTRY_SIZE + 9, new Uint8Array([0xee])]]);
      for (const seq of [1, 14, 15, 16, last.seq]) {
        await c.seek({ part: 0, seq });
        expect((await c.read({ max: 1 }))[0]!.data).toBe(texts(1, seq - 1)[0]);
      }
    });

    it("seeks by time to the last indexed message before it: never later than the first message at or after it", async () => {
      const ctx = await setup();
      // Times in the past (a seek to a time still to come is "latest"); each writer closed
      // before the clock is put back, as leases (unstorage) are dated with it too.
      const base = Date.now() - 100_000;
      const now = vi.spyOn(Date, "now");
      now.mockReturnValue(base + 1_000);
      let q = await writer(ctx.driver, { indexInterval: 5 });
      await q.pushBatch(texts(12)); // entries 1, 6, 11 at base + 1_000
      now.mockReturnValue(base + 2_000);
      await q.pushBatch(texts(12, 12)); // entries 16, 21 at base + 2_000 (seq 13..24)
      await q.close(); // end entry (25) at base + 2_000
      now.mockReturnValue(base + 3_000);
      q = await writer(ctx.reopen(), { indexInterval: 5 }); // part 1
      await q.pushBatch(texts(3, 24));
      await q.close();
      now.mockRestore();
      const c = await consumer(ctx.driver);
      const first = async (time: number | Date) => {
        await c.seek({ time });
        return (await c.read({ max: 1 }))[0]?.data;
      };
      expect(await first(0)).toBe("m000");
      expect(await first(base + 1_000)).toBe("m000");
      // m012 is the first message written at base + 2_000; the seek lands on seq 11 (m010), the last dated before.
      expect(await first(base + 1_500)).toBe("m010");
      expect(await first(new Date(base + 2_000))).toBe("m010");
      expect(await first(base + 2_500)).toBe("m024"); // part 0 ended before: part 1
      expect(await first(base + 3_000)).toBe("m024");
      await c.seek({ time: Date.now() + 60_000 });
      expect(await c.read()).toEqual([]); // at the end, as "latest"
      await expect(c.seek({ time: Number.NaN })).rejects.toMatchObject({ code: "E_CURSOR" });
    });

    /** A queue of `parts` sealed parts of 10 messages each (m0..), and a current part with `current` more. */
    const partsOfTen = async (ctx: EngineTestContext, parts: number, current = 0) => {
      for (let p = 0; p < parts; p++) {
        const q = await QueueWriter.open("q", { driver: ctx.reopen(), durability: "none" });
        await q.pushBatch(texts(10, p * 10));
        await q.close();
      }
      const q = await writer(ctx.driver);
      if (current > 0) await q.pushBatch(texts(current, parts * 10));
      return q;
    };

    it("keeps at most maxParts parts: the oldest go first, never the current one", async () => {
      const ctx = await setup();
      await partsOfTen(ctx, 4, 2); // parts 0..3 sealed, part 4 current
      const result = await pruneQueue(ctx.driver, "q", { maxParts: 2 });
      expect(result.deleted.map((p) => [p.part, p.messages])).toEqual([
        [0, 10],
        [1, 10],
        [2, 10],
      ]);
      expect(result.messages).toBe(30);
      expect(result.bytes).toBe(3 * 290);
      expect(await listParts(ctx.driver, "q")).toEqual([3, 4]);
      // The current part is never deleted, whatever the limits say.
      expect(
        (await pruneQueue(ctx.driver, "q", { maxParts: 1, maxBytes: 1, maxAgeMs: 1 }, { now: Date.now() + 10_000_000 })).deleted.map((p) => p.part),
      ).toEqual([3]);
      expect(await listParts(ctx.driver, "q")).toEqual([4]);
      expect((await pruneQueue(ctx.driver, "q", { maxParts: 1, maxBytes: 1 })).deleted).toEqual([]);
      const c = await consumer(ctx.reopen());
      expect((await c.read({ max: 100 })).map((m) => m.data)).toEqual(texts(2, 40));
    });

    it("never deletes the part being written when a newer part directory exists beside it (made by a writer that had lost its lock)", async () => {
      const ctx = await setup();
      const q = await partsOfTen(ctx, 2, 3); // parts 0, 1 sealed, part 2 current and open
      // A paused writer, its lock taken over meanwhile, made part 3's directory and file before its append was refused.
      await ctx.driver.mkdir(partDir("q", 3));
      await appendToLog(ctx.driver, partPath("q", 3), new Uint8Array(0));
      expect(await listParts(ctx.driver, "q")).toEqual([0, 1, 2, 3]);
      expect((await pruneQueue(ctx.driver, "q", { maxParts: 1 })).deleted.map((p) => p.part)).toEqual([0, 1]);
      expect(await listParts(ctx.driver, "q")).toEqual([2, 3]);
      await q.pushBatch(texts(2, 100));
      const c = await consumer(ctx.driver);
      expect((await c.read({ max: 100 })).map((m) => m.data)).toEqual([...texts(3, 20), ...texts(2, 100)]);
    });

    it("keeps at most maxBytes, counting the current part", async () => {
      const ctx = await setup();
      await partsOfTen(ctx, 3, 10); // 290 bytes a part
      expect((await pruneQueue(ctx.driver, "q", { maxBytes: 3 * 290 })).deleted.map((p) => p.part)).toEqual([0]);
      expect((await pruneQueue(ctx.driver, "q", { maxBytes: 290 + 1 })).deleted.map((p) => p.part)).toEqual([1, 2]);
    });

    it("deletes by age from each part's index: only parts whose last message is older", async () => {
      const ctx = await setup();
      const now = vi.spyOn(Date, "now");
      for (const [i, time] of [1_000_000, 2_000_000].entries()) {
        now.mockReturnValue(time);
        const q = await QueueWriter.open("q", { driver: ctx.reopen(), durability: "none" });
        await q.pushBatch(texts(10, i * 10));
        await q.close(); // part i sealed at `time`
      }
      now.mockRestore();
      await writer(ctx.driver); // part 2, current
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 500_000 }, { now: 1_400_000 })).deleted).toEqual([]);
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 500_000 }, { now: 1_600_000 })).deleted.map((p) => p.part)).toEqual([0]);
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 500_000 }, { now: 2_400_000 })).deleted).toEqual([]);
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 500_000 }, { now: 9_600_000 })).deleted.map((p) => p.part)).toEqual([1]);
    });

    it("a compressed (v3) part left by a crash gets its index sealed when the next writer starts a new part: it ages out", async () => {
      const ctx = await setup();
      const dictionary = new TextEncoder().encode("message 000 message 001 ".repeat(40));
      let q = await writer(ctx.driver, { compression: "zstd", compressionDictionary: dictionary });
      await q.pushBatch(Array.from({ length: 25 }, (_, i) => `message ${String(i).padStart(3, "0")} `.repeat(8)));
      await q.close();
      // As a crash leaves it: no end entry.
      const entries = (await readPartIndex(ctx.driver, "q", 0))!;
      expect(entries.map((e) => e.seq)).toEqual([1, 11, 21, 26]);
      await ctx.driver.remove("q-0/q_index");
      await appendToLog(ctx.driver, "q-0/q_index", encodeEntries(entries.slice(0, -1)));
      q = await writer(ctx.reopen(), { compression: "zstd", compressionDictionary: dictionary });
      expect(q.position.part).toBe(1);
      expect((await readPartIndex(ctx.driver, "q", 0))!.map((e) => e.seq)).toEqual([1, 11, 21, 26]);
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 1 }, { now: Date.now() + 10_000 })).deleted.map((p) => p.part)).toEqual([0]);
    });

    it("a part without an index has no known age: age alone never deletes it", async () => {
      const ctx = await setup();
      await (await partsOfTen(ctx, 2)).close();
      await ctx.driver.remove("q-0/q_index");
      expect((await pruneQueue(ctx.driver, "q", { maxAgeMs: 1 }, { now: Date.now() + 1_000_000 })).deleted).toEqual([]);
      expect((await pruneQueue(ctx.driver, "q", { maxParts: 2 })).deleted.map((p) => p.part)).toEqual([0]);
    });

    it("deleteConsumed deletes a part once every consumer has committed past it, and nothing without consumers", async () => {
      const ctx = await setup();
      await partsOfTen(ctx, 3, 1);
      expect((await pruneQueue(ctx.driver, "q", { deleteConsumed: true })).deleted).toEqual([]);
      const fast = await consumer(ctx.driver, "fast");
      const slow = await consumer(ctx.driver, "slow");
      await fast.commit((await fast.read({ max: 25 })).at(-1)!); // into part 2
      await slow.commit((await slow.read({ max: 10 })).at(-1)!); // the very end of part 0
      expect((await pruneQueue(ctx.driver, "q", { deleteConsumed: true })).deleted.map((p) => p.part)).toEqual([0]);
      await slow.commit((await slow.read({ max: 9 })).at(-1)!); // one short of the end of part 1
      expect((await pruneQueue(ctx.driver, "q", { deleteConsumed: true })).deleted).toEqual([]);
      // slow, at the very end of deleted part 0, missed nothing.
      expect(slow.takeMissed()).toBe(0);
    });

    it("a consumer whose saved position is in a deleted part goes on at the oldest message left, told exactly how many it missed", async () => {
      const ctx = await setup();
      await partsOfTen(ctx, 3, 4);
      let c = await consumer(ctx.driver);
      await c.commit((await c.read({ max: 3 })).at(-1)!); // 3 of part 0 read
      await c.close();
      const atEnd = await consumer(ctx.driver, "atEnd");
      await atEnd.commit((await atEnd.read({ max: 20 })).at(-1)!); // the very end of part 1
      await atEnd.close();
      expect((await pruneQueue(ctx.driver, "q", { maxParts: 2 })).deleted.map((p) => p.part)).toEqual([0, 1]);
      const problems: QueueProblem[] = [];
      c = await consumer(ctx.reopen(), "c", { onProblem: (p) => problems.push(p) });
      expect(problems.map((p) => [p.code, p.missed])).toEqual([["MISSED", 17]]);
      expect(c.takeMissed()).toBe(17);
      expect(c.takeMissed()).toBe(0);
      expect((await c.read({ max: 100 })).map((m) => m.data)).toEqual(texts(14, 20));
      await c.close();
      const again = await consumer(ctx.reopen(), "c", { onProblem: (p) => problems.push(p) }); // not committed: told once all the same
      expect(problems.length).toBe(1);
      expect((await again.read({ max: 1 })).map((m) => m.data)).toEqual(texts(1, 20));
      const quiet: QueueProblem[] = [];
      const d = await consumer(ctx.reopen(), "atEnd", { onProblem: (p) => quiet.push(p) });
      expect(quiet).toEqual([]);
      expect((await d.read({ max: 100 })).map((m) => m.data)).toEqual(texts(14, 20));
    });

    it("a live consumer in a part that gets deleted is told what it missed: read + missed = all, in order, nothing twice", async () => {
      const ctx = await setup();
      await (await partsOfTen(ctx, 3, 5)).close(); // parts 0..2 and a part 3 of 5 (a closed writer rolls on reopen)
      const problems: QueueProblem[] = [];
      const c = await consumer(ctx.driver, "c", { onProblem: (p) => problems.push(p), readChunkBytes: 4096 });
      const got = (await c.read({ max: 4 })).map((m) => m.data as string);
      const parts = await listParts(ctx.driver, "q");
      await pruneQueue(ctx.reopen(), "q", { maxParts: 2 }); // deletes 0 and 1 under the reader (another driver instance)
      for (;;) {
        const batch = await c.read({ max: 3 });
        if (batch.length === 0) break;
        got.push(...batch.map((m) => m.data as string));
      }
      const missed = problems.filter((p) => p.code === "MISSED").reduce((sum, p) => sum + p.missed!, 0);
      expect(problems.filter((p) => p.code !== "MISSED")).toEqual([]);
      expect(missed).toBeGreaterThanOrEqual(10);
      expect(got.length + missed).toBe(35);
      expect(got).toEqual([...new Set(got)]);
      expect(got.map((m) => Number(m.slice(1)))).toEqual([...got.map((m) => Number(m.slice(1)))].sort((a, b) => a - b));
      expect(got.slice(-15)).toEqual(texts(15, 20));
      expect(parts.length).toBe(4);
    });

    it("a live consumer in a compressed (v3) part that gets deleted before it read it is told what it missed, not damage", async () => {
      const ctx = await setup();
      const long = (from: number) => Array.from({ length: 10 }, (_, i) => `message ${String(from + i).padStart(3, "0")} `.repeat(8));
      const dictionary = new TextEncoder().encode("message 000 message 001 ".repeat(40));
      for (let p = 0; p < 3; p++) {
        const q = await QueueWriter.open("q", { driver: ctx.reopen(), durability: "none", compression: "zstd", compressionDictionary: dictionary });
        await q.pushBatch(long(p * 10));
        await q.close();
      }
      expect((await ctx.driver.readRecord("q-0/q_dict"))?.length).toBeGreaterThan(0);
      const problems: QueueProblem[] = [];
      const c = await consumer(ctx.driver, "c", { onProblem: (p) => problems.push(p) }); // at part 0, nothing read yet
      await pruneQueue(ctx.reopen(), "q", { maxParts: 2 }); // deletes 0 and 1 (with their dictionaries) under the reader
      const got: string[] = [];
      for (let batch = await c.read({ max: 3 }); batch.length > 0; batch = await c.read({ max: 3 })) got.push(...batch.map((m) => m.data as string));
      expect(problems.filter((p) => p.code !== "MISSED")).toEqual([]);
      const missed = c.takeMissed();
      expect(got.length + missed).toBe(30);
      expect(got.slice(-10)).toEqual(long(20));
    });

    it("the writer applies retention in the background as parts roll", async () => {
      const { driver } = await setup();
      const q = await writer(driver, { maxPartBytes: 1024, retention: { maxParts: 3, intervalMs: 20 } });
      for (let i = 0; i < 20; i++) await q.pushBatch(texts(40, i * 40));
      await q.flush();
      for (let i = 0; i < 100 && (await listParts(driver, "q")).length > 3; i++) await sleep(20);
      const parts = await listParts(driver, "q");
      expect(parts.length).toBe(3);
      expect(parts.at(-1)).toBe(q.position.part);
      expect(parts[0]).toBeGreaterThan(10);
    });
  });
}
