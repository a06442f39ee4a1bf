// Over 300 lines: one suite of the produce extras (delays, keys and their side files) that every
// driver file runs by one call; each test is a case a review or a crash found.
// Delayed messages and idempotent produce (src/writer/produce.ts) on every driver: timing, order,
// both kinds of consumer, restarts, keys, windows, and INTENTs a crash left behind.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LogFile, QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { VQueueError } from "../../src/core/errors";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { IdempotencyStore } from "../../src/writer/idempotency";
import { deleteQueue } from "../../src/admin/delete";
import { delayedPath, idempotencyPath } from "../../src/storage/paths";
import type { QueueOptions } from "../../src/options/queue";
import type { EngineTestContext } from "./engine-suite";
import { sleep } from "../helpers/sleep";

const quiet = { durability: "none", onProblem: () => {} } as const;

/** An object's method `name` replaced by `replace` (given the original, bound), the rest as it is. */
function withMethod<T extends object>(object: T, name: string, replace: (original: (...args: never[]) => unknown) => unknown): T {
  return new Proxy(object, {
    get(target, prop) {
      const value = Reflect.get(target, prop) as unknown;
      const bound = typeof value === "function" ? (value as (...args: never[]) => unknown).bind(target) : value;
      return prop === name ? replace(bound as (...args: never[]) => unknown) : bound;
    },
  });
}

/** A driver whose delayed side file of queue "q" is `wrap`ped (slow appends, counted syncs). */
function wrapDelayed(inner: QueueDriver, wrap: (log: LogFile) => LogFile): QueueDriver {
  return withMethod(inner, "openLog", (openLog) => async (path: string, o: { create: boolean }) => {
    const log = await (openLog as QueueDriver["openLog"])(path, o);
    return log && path === delayedPath("q") ? wrap(log) : log;
  });
}

/** Appends to the delayed side file take `ms` (a slow disk or fsync). */
const slowDelayed = (inner: QueueDriver, ms: number) =>
  wrapDelayed(inner, (log) =>
    withMethod(
      log,
      "append",
      (append) =>
        async (...args: never[]) => (await sleep(ms), append(...args)),
    ),
  );

export function produceTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe("delayed messages and idempotent produce", () => {
    const opened: { close(): Promise<void>; closed: boolean }[] = [];
    afterEach(async () => {
      for (const x of opened.splice(0).reverse()) if (!x.closed) await x.close().catch(() => {});
    });
    const writer = async (driver: QueueDriver, options: QueueOptions = {}) => {
      const w = await QueueWriter.open("q", { driver, ...quiet, ...options });
      opened.push(w);
      return w;
    };
    const reader = async (driver: QueueDriver, name = "c") => {
      const c = await QueueConsumer.open("q", name, { driver, onProblem: () => {} });
      opened.push(c);
      return c;
    };
    const readAll = async (c: QueueConsumer) => (await c.read({ max: 1000 })).map((m) => m.data as string);

    it("a delayed message reaches no consumer, ordered or shared, before it is due, then comes once, after what was pushed meanwhile", async () => {
      const { driver } = await setup();
      const w = await writer(driver);
      const started = Date.now();
      // Long enough that opening both consumers and their first reads end before it is due, even
      // on a slow storage (workerd's Durable Objects under Miniflare, on a loaded machine).
      const receipt = await w.produce(["later"], { delayMs: 2500 });
      expect(receipt).toMatchObject({ count: 1, replayed: false });
      expect(receipt.first).toBeUndefined();
      expect(receipt.until).toBeGreaterThanOrEqual(started + 2500);
      await w.push("now");
      const c = await reader(driver);
      const s = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
      opened.push(s);
      expect(await readAll(c)).toEqual(["now"]);
      expect((await s.poll({ max: 10, timeoutMs: 0 })).map((m) => m.data)).toEqual(["now"]);
      // Waiting for more: nothing until it is due.
      expect(await c.wait({ timeoutMs: 400 })).toBe(false);
      expect(await s.poll({ max: 10, timeoutMs: 200 })).toEqual([]);
      const got = await s.poll({ max: 10, timeoutMs: 5000 });
      expect(Date.now()).toBeGreaterThanOrEqual(receipt.until!);
      expect(got.map((m) => m.data)).toEqual(["later"]);
      expect(await c.wait({ timeoutMs: 5000 })).toBe(true);
      expect(await readAll(c)).toEqual(["later"]);
      expect(await c.wait({ timeoutMs: 300 })).toBe(false);
    });

    it("delayed messages come in due order (a batch in its order), bytes as bytes, `at` as a time", async () => {
      const { driver } = await setup();
      const w = await writer(driver);
      // 400 ms apart: the produces land in time for that order at a load of 4.
      await w.produce(["b1", "b2"], { delayMs: 1400 });
      await w.produce([new Uint8Array([1, 2, 3])], { at: new Date(Date.now() + 1000) });
      await w.produce(["a"], { at: Date.now() + 600 });
      await w.produce(["past"], { at: "2001-01-01T00:00:00Z" });
      const c = await reader(driver);
      const got: unknown[] = [];
      const until = Date.now() + 10_000;
      while (got.length < 5 && Date.now() < until) {
        await c.wait({ timeoutMs: 1000 });
        for (const m of await c.read({ max: 100 })) got.push(typeof m.data === "string" ? m.data : [...m.data]);
        await c.commit();
      }
      expect(got).toEqual(["past", "a", [1, 2, 3], "b1", "b2"]);
    });

    it("delayed messages survive a close: not delivered without a writer, delivered by the next one when due, once", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver);
      // d1, d2 due well after "soon" is moved at the next writer's open (slow storages included).
      await w.produce(["d1", "d2"], { delayMs: 2500 });
      await w.produce(["soon"], { delayMs: 100 });
      await w.close();
      await sleep(200);
      // No writer: still aside.
      const c = await reader(ctx.reopen());
      expect(await readAll(c)).toEqual([]);
      const again = await writer(ctx.reopen());
      // "soon" is due: moved at open.
      expect(await c.wait({ timeoutMs: 5000 })).toBe(true);
      expect(await readAll(c)).toEqual(["soon"]);
      await c.commit();
      expect(await c.wait({ timeoutMs: 200 })).toBe(false);
      expect(await c.wait({ timeoutMs: 5000 })).toBe(true);
      expect(await readAll(c)).toEqual(["d1", "d2"]);
      await c.commit();
      await again.close();
      // Moved ones are not moved again by a later writer.
      await writer(ctx.reopen());
      expect(await c.wait({ timeoutMs: 500 })).toBe(false);
      expect(await ctx.driver.readRecord(delayedPath("q"))).toBeDefined();
    });

    it("checks the options: delayMs, at, the key, both delays at once, and no messages", async () => {
      const { driver } = await setup();
      const w = await writer(driver);
      for (const options of [
        { delayMs: -1 },
        { delayMs: 1.5 },
        { delayMs: 400 * 24 * 3600 * 1000 },
        { at: "tomorrow" },
        { at: Date.now() + 400 * 24 * 3600 * 1000 },
        { delayMs: 1, at: 1 },
        { key: "" },
        { key: "x".repeat(256) },
        { key: "tab\there" },
        { key: "é" },
      ]) {
        await expect(w.produce(["x"], options as never), JSON.stringify(options)).rejects.toMatchObject({ code: "E_OPTION" });
      }
      await expect(w.produce([])).rejects.toMatchObject({ code: "E_MESSAGE" });
      await expect(QueueWriter.open("q2", { driver, idempotencyWindowMs: 10 })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("idempotencyWindowMs"),
      });
    });

    it("a key accepted once is written once: a replay answers the first result, concurrent ones wait for it, another body too", async () => {
      const { driver } = await setup();
      const w = await writer(driver);
      const first = await w.produce(["one", "two"], { key: "k-1" });
      expect(first).toMatchObject({ count: 2, replayed: false, first: { part: expect.any(Number), seq: expect.any(Number) } });
      const again = await w.produce(["one", "two"], { key: "k-1" });
      expect(again).toEqual({ ...first, replayed: true });
      // The same key with other messages: the first answer, nothing written (documented).
      expect(await w.produce(["other"], { key: "k-1" })).toEqual({ ...first, replayed: true });
      const together = await Promise.all(Array.from({ length: 5 }, () => w.produce(["x"], { key: "k-2" })));
      expect(together.filter((r) => !r.replayed)).toHaveLength(1);
      expect(new Set(together.map((r) => r.first!.offset)).size).toBe(1);
      // Due in 2 s: a loaded machine (Bun's run at load 10 took over 300 ms) reads before it is.
      const delayed = await w.produce(["later"], { key: "k-3", delayMs: 2000 });
      expect(await w.produce(["later"], { key: "k-3", delayMs: 2000 })).toEqual({ ...delayed, replayed: true });
      const c = await reader(driver);
      expect(await readAll(c)).toEqual(["one", "two", "x"]);
      expect(await c.wait({ timeoutMs: 20_000 })).toBe(true);
      expect(await readAll(c)).toEqual(["later"]);
    });

    it("keys survive a restart within the window, and are forgotten after it", async () => {
      const ctx = await setup();
      // Room for a close and a reopen on a slow storage at a load average of 4; then waited out.
      const windowMs = 5000;
      let w = await writer(ctx.driver, { idempotencyWindowMs: windowMs });
      const first = await w.produce(["a"], { key: "kept" });
      const keptBy = Date.now(); // the key's time is no later
      const delayed = await w.produce(["d"], { key: "kept-delayed", delayMs: 60_000 });
      await w.close();
      w = await writer(ctx.reopen(), { idempotencyWindowMs: windowMs });
      expect(await w.produce(["a"], { key: "kept" })).toEqual({ ...first, replayed: true });
      expect(await w.produce(["d"], { key: "kept-delayed", delayMs: 60_000 })).toEqual({ ...delayed, replayed: true });
      await sleep(Math.max(0, keptBy + windowMs + 100 - Date.now()));
      expect((await w.produce(["a"], { key: "kept" })).replayed).toBe(false);
      await w.close();
      const c = await reader(ctx.reopen());
      expect(await readAll(c)).toEqual(["a", "a"]);
    });

    it("the cap on keys forgets the oldest first", async () => {
      const { driver } = await setup();
      const w = await writer(driver, { idempotencyMaxKeys: 2 });
      await w.produce(["1"], { key: "k1" });
      await w.produce(["2"], { key: "k2" });
      await w.produce(["3"], { key: "k3" });
      expect((await w.produce(["3"], { key: "k3" })).replayed).toBe(true);
      expect((await w.produce(["1"], { key: "k1" })).replayed).toBe(false);
      // Moving delayed messages into the queue takes keys for a moment only: the callers' stay.
      await w.produce(["d1", "d2", "d3"], { delayMs: 10 });
      const c = await reader(driver);
      for (let got = 0, deadline = Date.now() + 5000; got < 3 + 3 && Date.now() < deadline;) {
        await c.wait({ timeoutMs: 500 });
        got += (await c.read({ max: 100 })).length;
      }
      await sleep(50);
      expect((await w.produce(["1"], { key: "k1" })).replayed).toBe(true);
      expect((await w.produce(["3"], { key: "k3" })).replayed).toBe(true);
    });

    it("an INTENT a crash left without DONE: answered from the queue when its message is there, forgotten when not", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver);
      const written = await w.push("written");
      await w.close();
      // What a writer that died between the INTENT and the DONE leaves: "in" reached the queue, "lost" did not.
      const store = await IdempotencyStore.open(ctx.driver, "q", { windowMs: 60_000, maxKeys: 10, sync: false, onProblem: () => {} });
      await store.intents([{ key: "in", skip: 0, count: 1 }], written.part, written.seq - 1);
      await store.intents([{ key: "lost", skip: 0, count: 1 }], written.part, written.seq);
      // Compaction while they are unsettled keeps them.
      await store.compact();
      await store.close();
      const again = await writer(ctx.reopen());
      expect(await again.produce(["written"], { key: "in" })).toMatchObject({ replayed: true, first: written, last: written });
      expect(await again.produce(["lost"], { key: "lost" })).toMatchObject({ replayed: false });
      await again.close();
      const c = await reader(ctx.reopen());
      expect(await readAll(c)).toEqual(["written", "lost"]);
    });

    it("a compaction cut short (the storage failing after the file was cut, as in a Redis failover) loses no key", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver);
      const first = await w.produce(["once"], { key: "k" });
      await w.close();
      // The next writer's open compacts the idempotency file: the storage fails once it is cut.
      let injected = 0;
      const failing = withMethod(ctx.reopen(), "openLog", (openLog) => async (path: string, o: { create: boolean }) => {
        const log = await (openLog as QueueDriver["openLog"])(path, o);
        if (!log || path !== idempotencyPath("q")) return log;
        let cut = false;
        const cutting = withMethod(log, "truncate", (truncate) => async (length: number, fence?: unknown) => {
          await (truncate as LogFile["truncate"])(length, fence as never);
          cut = length === 0;
        });
        return withMethod(cutting, "append", (append) => async (...args: never[]) => {
          if (!cut) return append(...args);
          injected++;
          throw new VQueueError("E_IO", "the storage is down (injected)");
        });
      });
      await expect(writer(failing)).rejects.toThrow(/injected/);
      expect(injected).toBe(1);
      // A retry on the next writer is answered from the first produce, not written again.
      const again = await writer(ctx.reopen());
      expect(await again.produce(["once"], { key: "k" })).toMatchObject({ replayed: true, first: first.first });
      await again.close();
      expect(await readAll(await reader(ctx.reopen()))).toEqual(["once"]);
    });

    it("a torn last frame of the side files is cut off and reported; what was whole is kept", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver);
      await w.produce(["kept"], { delayMs: 300 });
      await w.produce(["k"], { key: "key" });
      await w.close();
      for (const path of [delayedPath("q"), idempotencyPath("q")]) {
        const log = (await ctx.driver.openLog(path, { create: false }))!;
        // Half a frame, as a write cut short leaves it.
        await log.append(await log.size(), new Uint8Array([40, 0, 0, 0, 1, 2, 3]));
        await log.close();
      }
      const problems: string[] = [];
      const again = await writer(ctx.reopen(), { onProblem: (p) => problems.push(`${p.code} ${p.message}`) });
      expect(problems).toEqual([
        expect.stringMatching(/^TORN_TAIL 7 bytes at the end of q_info_idem/),
        expect.stringMatching(/^TORN_TAIL 7 bytes at the end of q_info_delayed/),
      ]);
      expect((await again.produce(["k"], { key: "key" })).replayed).toBe(true);
      const c = await reader(ctx.reopen());
      const got: string[] = [];
      for (const deadline = Date.now() + 5000; got.length < 2 && Date.now() < deadline;) {
        await c.wait({ timeoutMs: 500 });
        got.push(...(await readAll(c)));
        await c.commit();
      }
      expect(got).toEqual(["k", "kept"]);
      // Later frames go after the cut: nothing is lost on the next open either.
      await again.produce(["later"], { delayMs: 60_000, key: "key-2" });
      await again.close();
      const third = await writer(ctx.reopen(), { onProblem: (p) => problems.push(p.code) });
      expect(problems).toHaveLength(2);
      expect((await third.produce(["later"], { key: "key-2" })).replayed).toBe(true);
    });

    it("a delayed message produced after a restart is not taken for an earlier one's move (ids start again once the file is emptied)", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver);
      await w.produce(["first"], { delayMs: 30 });
      const c = await reader(ctx.driver);
      expect(await c.wait({ timeoutMs: 2000 })).toBe(true);
      await sleep(50); // moved; nothing pending: the delayed file is emptied
      await w.close();
      const again = await writer(ctx.reopen()); // a restart within the idempotency window
      await again.produce(["second"], { delayMs: 30 });
      const got: string[] = [];
      for (const deadline = Date.now() + 2000; got.length < 2 && Date.now() < deadline;) {
        await c.wait({ timeoutMs: 300 });
        got.push(...(await readAll(c)));
        await c.commit();
      }
      expect(got).toEqual(["first", "second"]);
    });

    it("a delayed produce acknowledged while the last due message moves is not lost to the file's compaction", async () => {
      const ctx = await setup();
      const w = await writer(slowDelayed(ctx.driver, 100));
      await w.produce(["A"], { delayMs: 10 });
      await sleep(50); // A's move is under way: its MOVED append takes 100 ms
      expect((await w.produce(["B"], { delayMs: 60_000 })).until).toBeGreaterThan(0);
      await sleep(200);
      await w.close();
      await writer(ctx.reopen());
      const c = await reader(ctx.reopen());
      expect(await readAll(c)).toEqual(["A"]);
      // B is still pending: its ADD survived.
      const log = (await ctx.driver.openLog(delayedPath("q"), { create: false }))!;
      const size = await log.size();
      await log.close();
      expect(size).toBeGreaterThan(0);
    });

    it("the idempotency file is compacted while the writer runs: bounded by the keys in their window", async () => {
      const { driver } = await setup();
      // The cap keeps 200 keys (the window, a minute, keeps them all): the file is bounded by those.
      const w = await writer(driver, { idempotencyMaxKeys: 200, idempotencyWindowMs: 60_000 });
      const sizes: number[] = [];
      for (let round = 0; round < 4; round++) {
        // Concurrent: compaction runs while other keyed produces are in flight.
        await Promise.all(Array.from({ length: 1000 }, (_, i) => w.produce([`m${round}.${i}`], { key: `k${round}.${i}` })));
        const log = (await driver.openLog(idempotencyPath("q"), { create: false }))!;
        sizes.push(await log.size());
        await log.close();
      }
      // 4,000 keyed produces are some 500 KB of frames uncompacted.
      expect(Math.max(...sizes)).toBeLessThan(150_000);
      expect((await w.produce(["again"], { key: "k3.999" })).replayed).toBe(true);
      await w.close();
      // What compaction kept opens again: the keys in the cap are still known.
      const again = await writer(driver, { idempotencyMaxKeys: 200, idempotencyWindowMs: 60_000 });
      expect((await again.produce(["again"], { key: "k3.999" })).replayed).toBe(true);
    });

    it("a move whose MOVED frame was lost is not made again by a writer opened after the idempotency window", async () => {
      const ctx = await setup();
      const w = await writer(ctx.driver, { idempotencyWindowMs: 1000 });
      await w.produce(["kept aside"], { delayMs: 60_000 }); // keeps the delayed file from being emptied
      await w.produce(["moved"], { delayMs: 10 });
      const c = await reader(ctx.driver);
      expect(await c.wait({ timeoutMs: 2000 })).toBe(true);
      await sleep(50);
      await w.close();
      // A crash lost the last MOVED frame (21 bytes framed): only the move's idempotency key tells.
      const log = (await ctx.driver.openLog(delayedPath("q"), { create: false }))!;
      await log.truncate((await log.size()) - 21);
      await log.close();
      await sleep(1000);
      const again = await writer(ctx.reopen(), { idempotencyWindowMs: 1000 });
      await sleep(100);
      await again.close();
      // The MOVED frame is written at that open: a third writer, keys gone, does not move it either.
      await writer(ctx.reopen(), { idempotencyWindowMs: 1000 });
      await sleep(100);
      expect(await readAll(c)).toEqual(["moved"]);
    });

    it("with durability fsync, a round's MOVED frames are synced (once) before their keys are forgotten", async () => {
      const ctx = await setup();
      let syncs = 0;
      const driver = wrapDelayed(ctx.driver, (log) => withMethod(log, "sync", (sync) => () => (syncs++, sync())));
      const w = await writer(driver, { durability: "fsync" });
      await w.produce(["kept aside"], { delayMs: 60_000 }); // keeps the file from being emptied (a rewrite syncs too)
      // Due in 500 ms: the count below is read before they move, at a load of 4.
      await w.produce(["m1", "m2"], { delayMs: 500 });
      const before = syncs;
      const c = await reader(ctx.driver);
      expect(await c.wait({ timeoutMs: 10_000 })).toBe(true);
      expect(await readAll(c)).toEqual(["m1", "m2"]);
      // The round's sync comes once its moves are written (a loaded machine: later than 50 ms after
      // the messages show); then no second one for that round.
      await vi.waitFor(() => expect(syncs - before).toBeGreaterThanOrEqual(1), { timeout: 10_000, interval: 20 });
      await sleep(50);
      expect(syncs - before).toBe(1);
    });

    it("maxDelayed bounds the delayed messages pending: past it a delayed produce is refused (E_FULL), nothing written", async () => {
      const { driver } = await setup();
      await expect(QueueWriter.open("q2", { driver, maxDelayed: 0 })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("maxDelayed"),
      });
      const w = await writer(driver, { maxDelayed: 3 });
      await w.produce(["a", "b"], { delayMs: 60_000 });
      await expect(w.produce(["c", "d"], { delayMs: 60_000 })).rejects.toMatchObject({ code: "E_FULL", message: expect.stringContaining("maxDelayed") });
      await w.produce(["c"], { delayMs: 60_000 });
      await expect(w.produce(["d"], { delayMs: 60_000 })).rejects.toMatchObject({ code: "E_FULL" });
      // Not delayed: not bounded by it; the writer goes on.
      expect((await w.produce(["now"])).count).toBe(1);
    });

    it("deleteQueue removes the side files", async () => {
      const { driver } = await setup();
      const w = await writer(driver);
      await w.produce(["x"], { key: "k", delayMs: 60_000 });
      await w.close();
      expect(await driver.readRecord(delayedPath("q"))).toBeDefined();
      await deleteQueue(driver, "q");
      expect(await driver.readRecord(delayedPath("q"))).toBeUndefined();
      expect(await driver.readRecord(idempotencyPath("q"))).toBeUndefined();
    });
  });
}
