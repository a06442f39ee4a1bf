import { afterEach, expect, it } from "vitest";
import { browseMessages, type BrowseOptions } from "../../src/inspect/browse";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import { listConsumers } from "../../src/inspect/queues";
import { forgetPartDetails, partDetails } from "../../src/inspect/part-details";
import { pruneQueue } from "../../src/retention/prune";
import { queueTotals } from "../../src/log/totals";
import { QueueWriter } from "../../src/writer/writer";
import { patchLog } from "../helpers/damage";
import type { EngineTestContext } from "./engine-suite";
import { sleep } from "../helpers/sleep";

const texts = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `m${from + i}`);

/** Browsing without a consumer, and the parts' details: on every driver. */
export function browseTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  const open: QueueWriter[] = [];
  afterEach(async () => {
    for (const q of open.splice(0)) await q.close().catch(() => {});
  });
  /** `counts[i]` messages in part i, each part by a writer of its own (closed), or kept open for the last with `keepLast`. */
  const fill = async (driver: QueueDriver, counts: number[], keepLast = false, options: Parameters<typeof QueueWriter.open>[1] = {}) => {
    let n = 0;
    for (const [i, count] of counts.entries()) {
      const q = await QueueWriter.open("q", { driver, durability: "none", ...options });
      await q.pushBatch(texts(count, n));
      n += count;
      if (keepLast && i === counts.length - 1) open.push(q);
      else await q.close();
    }
  };
  const browse = (driver: QueueDriver, options: BrowseOptions) => browseMessages(driver, "q", { onProblem: () => {}, ...options });

  it("browse: pages through every part from the oldest, moving and creating no consumer", async () => {
    const { driver } = await setup();
    await fill(driver, [3, 4], true);
    await open[0]!.push(new Uint8Array([0, 255]));
    const seen: unknown[] = [];
    let from: string | null = "earliest";
    let pages = 0;
    while (from !== null) {
      const page = await browse(driver, { from, limit: 3 });
      seen.push(...page.messages.map((m) => m.data));
      from = page.next;
      pages++;
    }
    expect(seen).toEqual([...texts(7), new Uint8Array([0, 255])]);
    expect(pages).toBe(3);
    const first = await browse(driver, { limit: 2 });
    expect(first.messages.map((m) => [m.part, m.seq, m.type])).toEqual([
      [0, 1, "string"],
      [0, 2, "string"],
    ]);
    // The cursor is the position after the last message: the next page starts with the one after it.
    expect((await browse(driver, { from: first.next!, limit: 1 })).messages.map((m) => m.data)).toEqual(["m2"]);
    expect(await listConsumers(driver, "q")).toEqual([]);
    // A page that reaches the end says so; a full page that ends exactly at the end too.
    expect((await browse(driver, { from: "earliest", limit: 8 })).next).toBeNull();
    expect((await browse(driver, { from: "earliest", limit: 7 })).next).not.toBeNull();
  });

  it("browse: 'latest' is the newest page, across parts; { part, seq } starts at that message; maxBytes shortens a page", async () => {
    const { driver } = await setup();
    await fill(driver, [5, 2], true);
    const latest = await browse(driver, { from: "latest", limit: 4 });
    expect(latest.messages.map((m) => m.data)).toEqual(["m3", "m4", "m5", "m6"]);
    expect(latest.next).toBeNull();
    expect((await browse(driver, { from: "latest", limit: 50 })).messages).toHaveLength(7);
    expect((await browse(driver, { from: { part: 0, seq: 4 }, limit: 2 })).messages.map((m) => m.data)).toEqual(["m3", "m4"]);
    const small = await browse(driver, { from: "earliest", maxBytes: 4 });
    expect(small.messages.map((m) => m.data)).toEqual(["m0", "m1"]);
    expect(small.next).toBe("0.54.2");
  });

  it("browse: from a time, through the parts' indexes as a consumer's seek", async () => {
    const { driver } = await setup();
    await fill(driver, [3]);
    await sleep(30);
    const time = Date.now();
    await sleep(30);
    await fill(driver, [2], true);
    expect((await browse(driver, { from: { time } })).messages.map((m) => [m.part, m.seq])).toEqual([
      [1, 1],
      [1, 2],
    ]);
    expect((await browse(driver, { from: { time: new Date(time).toISOString() } })).messages).toHaveLength(2);
    expect((await browse(driver, { from: { time: time + 60_000 } })).messages).toEqual([]);
  });

  it("browse: refuses a queue that does not exist, a cursor that names no message, a limit out of range", async () => {
    const { driver } = await setup();
    await expect(browse(driver, {})).rejects.toMatchObject({ code: "E_NOT_FOUND" });
    await fill(driver, [3]);
    await expect(browse(driver, { from: "0.7.1" })).rejects.toMatchObject({ code: "E_CURSOR" });
    await expect(browse(driver, { from: "nonsense" })).rejects.toMatchObject({ code: "E_CURSOR" });
    await expect(browse(driver, { from: { part: 0, seq: 9 } })).rejects.toMatchObject({ code: "E_CURSOR" });
    await expect(browse(driver, { limit: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
    await expect(browse(driver, { limit: 1001 })).rejects.toMatchObject({ code: "E_OPTION" });
  });

  it("browse: reports and skips a damaged record as a consumer does", async () => {
    const ctx = await setup();
    const q = await QueueWriter.open("q", { driver: ctx.driver, durability: "none" });
    const positions = await q.pushBatch(texts(6));
    await q.close();
    await patchLog(ctx.driver, "q-0/q_queue", [[positions[2]!.offset + 26, new Uint8Array([0x58])]]);
    const problems: QueueProblem[] = [];
    const page = await browseMessages(ctx.reopen(), "q", { onProblem: (p) => problems.push(p) });
    expect(page.messages.map((m) => m.data)).toEqual(["m0", "m1", "m3", "m4", "m5"]);
    expect(problems.map((p) => [p.code, p.offset])).toEqual([["BAD_RECORD", positions[2]!.offset]]);
  });

  it("browse: a page whose part retention deleted since goes on at the oldest part left, and counts what was missed", async () => {
    const { driver } = await setup();
    await fill(driver, [4, 4, 4], true);
    const first = await browse(driver, { limit: 3 });
    expect(first.next).toMatch(/^0\.\d+\.3$/);
    await pruneQueue(driver, "q", { maxParts: 2 });
    const problems: QueueProblem[] = [];
    const second = await browseMessages(driver, "q", { from: first.next!, limit: 3, onProblem: (p) => problems.push(p) });
    expect(second.messages.map((m) => m.data)).toEqual(["m4", "m5", "m6"]);
    expect(second.missed).toBe(1);
    expect(problems.map((p) => p.code)).toEqual(["MISSED"]);
  });

  it("browse and part details: a v3 part with compressed bodies", async () => {
    const { driver } = await setup();
    const dictionary = new TextEncoder().encode("message 000 message 001 ".repeat(40));
    const bodies = Array.from({ length: 20 }, (_, i) => `message ${String(i).padStart(3, "0")} `.repeat(8));
    const q = await QueueWriter.open("q", { driver, durability: "none", compression: "zstd", compressionDictionary: dictionary });
    await q.pushBatch(bodies);
    await q.close();
    const page = await browse(driver, { limit: 100 });
    expect(page.messages.map((m) => m.data)).toEqual(bodies);
    expect(page.messages.some((m) => m.stored !== undefined)).toBe(true);
    forgetPartDetails();
    const [part] = await partDetails(driver, "q", (await queueTotals(driver, "q"))!.parts());
    expect(part).toMatchObject({ id: 0, messages: 20, format: "v3" });
    expect(part!.compressionRatio).toBeGreaterThan(2);
    expect(part!.createdAt).toBeGreaterThan(Date.now() - 60_000);
  });

  it("part details: one call scans at most 32 parts not seen yet, newest first; the next calls fill in the rest", async () => {
    const { driver } = await setup();
    await fill(
      driver,
      Array.from({ length: 40 }, () => 1),
    );
    forgetPartDetails();
    const parts = (await queueTotals(driver, "q"))!.parts();
    const first = await partDetails(driver, "q", parts);
    expect(first.map((p) => p.id)).toEqual(parts.map((p) => p.id));
    expect(first.filter((p) => p.format === null).map((p) => p.id)).toEqual(parts.slice(0, 8).map((p) => p.id));
    const second = await partDetails(driver, "q", parts);
    expect(second.every((p) => p.format === "v2")).toBe(true);
  });

  it("part details: v2 parts, an empty newest part, the newest part followed as it grows", async () => {
    const { driver } = await setup();
    await fill(driver, [3, 2]);
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    open.push(q);
    forgetPartDetails();
    const before = Date.now();
    let details = await partDetails(driver, "q", (await queueTotals(driver, "q"))!.parts());
    expect(details.map((p) => [p.id, p.messages, p.format, p.compressionRatio])).toEqual([
      [0, 3, "v2", null],
      [1, 2, "v2", null],
      [2, 0, null, null],
    ]);
    expect(details[0]!.createdAt).toBeLessThanOrEqual(before);
    expect(details[2]!.createdAt).toBeNull();
    await q.push("now");
    // Sealed parts are not read again (the newest part's file is the writer's, shared: not opened either).
    const opened: string[] = [];
    const counting = new Proxy(driver, {
      get: (target, key) => {
        const value = Reflect.get(target, key) as unknown;
        if (key === "openLog") return (path: string, options: { create: boolean }) => (opened.push(path), target.openLog(path, options));
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    details = await partDetails(counting, "q", (await queueTotals(driver, "q"))!.parts());
    expect(details[2]).toMatchObject({ id: 2, messages: 1, format: "v2" });
    expect(details[2]!.createdAt).toBeGreaterThanOrEqual(before);
    expect(opened.filter((path) => path.endsWith("_queue"))).toEqual([]);
    forgetPartDetails();
    await partDetails(counting, "q", (await queueTotals(driver, "q"))!.parts());
    expect(opened.filter((path) => path.endsWith("_queue")).sort()).toEqual(["q-0/q_queue", "q-1/q_queue"]);
  });
}
