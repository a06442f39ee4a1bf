import { afterEach, describe, expect, it } from "vitest";
import unstorageDriver, { type UnstorageLike } from "../../adapters/drivers/unstorage";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueProblem } from "../../src/core/errors";
import { pruneQueue } from "../../src/retention/prune";
import { QueueWriter } from "../../src/writer/writer";
import { sleep } from "../helpers/sleep";

export interface UnstorageTestContext {
  /** A fresh, empty storage. */
  storage: UnstorageLike;
  /** The same data through a new storage object (and connection), as after a restart. */
  reopenStorage(): UnstorageLike | Promise<UnstorageLike>;
}

/** What is specific to the unstorage driver, over one backend; the engine suite runs beside it. */
export function describeUnstorageDriver(name: string, setup: () => Promise<UnstorageTestContext>, cleanup?: () => Promise<void>): void {
  describe(`unstorage driver over ${name}`, () => {
    const open: { close(): Promise<void> }[] = [];
    const track = <T extends { close(): Promise<void> }>(x: T): T => (open.push(x), x);
    afterEach(async () => {
      for (const x of open.splice(0)) await x.close().catch(() => {});
      await cleanup?.();
    });

    it("stores a part as chunk keys: an append writes one new key and rewrites none", async () => {
      const { storage } = await setup();
      const spy = spyOn(storage);
      const q = track(await QueueWriter.open("orders", { driver: unstorageDriver({ storage: spy.storage }), durability: "none" }));
      const [first] = await q.pushBatch(["a".repeat(100), "b".repeat(100)]);
      const keysBefore = await storage.getKeys("");
      spy.writes.length = 0;
      const [third] = await q.pushBatch(["c".repeat(100), "d".repeat(100)]);
      expect(first!.offset).toBe(0);
      // One new chunk named by its start offset, and the push info line: nothing else is written.
      expect(spy.writes.sort()).toEqual([`orders-0:orders_info_push`, `orders-0:orders_queue~${String(third!.offset).padStart(15, "0")}`]);
      const keysAfter = await storage.getKeys("");
      expect(keysAfter.filter((k) => !keysBefore.includes(k))).toEqual([`orders-0:orders_queue~000000000000250`]);
      expect(bytes(await storage.getItemRaw("orders-0:orders_queue"))).toHaveLength(250);
      expect(new TextDecoder().decode(bytes(await storage.getItemRaw("orders-0:orders_info_push")))).toMatch(/^orders;500;4;\d+\n/);
      expect(new TextDecoder().decode(bytes(await storage.getItemRaw("orders_info_queue")))).toMatch(/^orders;0;\d+\n/);
      const c = track(await QueueConsumer.open("orders", "c", { driver: unstorageDriver({ storage }) }));
      expect((await c.read({ max: 10 })).map((m) => (m.data as string)[0])).toEqual(["a", "b", "c", "d"]);
    });

    it("retention deletes a part's every key: its chunks, its index's chunks and its info line", async () => {
      const { storage } = await setup();
      const driver = unstorageDriver({ storage, maxChunkBytes: 64 });
      const q = await QueueWriter.open("q", { driver, durability: "none", indexInterval: 2 });
      for (let i = 0; i < 6; i++) await q.push(`message ${i}`);
      await q.close();
      track(await QueueWriter.open("q", { driver, durability: "none" }));
      expect((await storage.getKeys("q-0")).filter((k) => k.includes("~")).length).toBeGreaterThan(4);
      expect((await pruneQueue(driver, "q", { maxParts: 1 })).deleted.map((p) => p.part)).toEqual([0]);
      expect((await storage.getKeys("")).filter((k) => k.startsWith("q-0"))).toEqual([]);
      expect((await storage.getKeys("")).filter((k) => k.startsWith("q-1")).length).toBeGreaterThan(0);
    });

    it("splits a write larger than maxChunkBytes and reads it back across chunks", async () => {
      const { storage } = await setup();
      const driver = unstorageDriver({ storage, maxChunkBytes: 1000 });
      const q = track(await QueueWriter.open("big", { driver, durability: "none" }));
      const body = new Uint8Array(9500).map((_, i) => i % 251);
      await q.pushBatch(["small", body, "after"]);
      const chunks = (await storage.getKeys("big-0")).filter((k) => k.includes("big_queue"));
      expect(chunks.length).toBe(10); // 30 + 9525 + 30 bytes, 1000 per key at most
      const c = track(await QueueConsumer.open("big", "c", { driver: unstorageDriver({ storage }), readChunkBytes: 4096 }));
      const got = await c.read({ max: 10 });
      expect(got.map((m) => m.size)).toEqual([5, 9500, 5]);
      expect(got[1]!.data).toEqual(body);
    });

    for (const torn of [false, true]) {
      it(`recovers after a crash between a chunk write and the info write (${torn ? "torn chunk" : "whole chunk"})`, async () => {
        const { storage } = await setup();
        let q = await QueueWriter.open("q", { driver: unstorageDriver({ storage }), durability: "none" });
        await q.pushBatch(["one", "two"]);
        await q.close();
        // A process that dies right after (part of) the chunk of its next batch is stored.
        const dying = spyOn(storage, { dieAfterChunk: true, torn });
        const doomed = await QueueWriter.open("q", {
          driver: unstorageDriver({ storage: dying.storage, lockLeaseMs: 150 }),
          durability: "none",
          rollOnOpen: false,
        });
        void doomed.pushBatch(["three", "four"]).catch(() => {});
        await dying.dead;
        const chunkKeys = () => storage.getKeys("q-0").then((keys) => keys.filter((k) => k.includes("q_queue~")).sort());
        expect(await chunkKeys()).toEqual(["q-0:q_queue~000000000000056"]);
        await sleep(200); // its lock lease runs out
        const problems: QueueProblem[] = [];
        q = track(await QueueWriter.open("q", { driver: unstorageDriver({ storage }), durability: "none", onProblem: (p) => problems.push(p) }));
        expect(problems.map((p) => p.code)).toEqual(torn ? ["TORN_TAIL"] : []);
        // A torn chunk is cut off (its key removed); a whole one is kept and the info line follows it.
        expect(await chunkKeys()).toEqual(torn ? [] : ["q-0:q_queue~000000000000056"]);
        expect(q.position.part).toBe(1);
        await q.push("five");
        const c = track(await QueueConsumer.open("q", "c", { driver: unstorageDriver({ storage }) }));
        expect((await c.read({ max: 10 })).map((m) => m.data)).toEqual(torn ? ["one", "two", "five"] : ["one", "two", "three", "four", "five"]);
      });
    }

    it("keeps a live holder's lock, frees it on release, and lets it expire when the holder dies", async () => {
      const { storage } = await setup();
      const holder = spyOn(storage);
      const a = await unstorageDriver({ storage: holder.storage, lockLeaseMs: 500, key: "a" }).lock("x.lock");
      expect(a).toBeDefined();
      await sleep(1200); // over two leases: refreshed (a lease long enough for a loaded machine's late timers)
      const b = unstorageDriver({ storage, lockLeaseMs: 120, key: "b" });
      expect(await b.lock("x.lock")).toBeUndefined();
      await a!.release();
      const again = await b.lock("x.lock");
      expect(again).toBeDefined();
      expect(await unstorageDriver({ storage, key: "a" }).lock("x.lock")).toBeUndefined();
      // The holder's process dies: nothing refreshes the lease, and it runs out.
      const dying = spyOn(storage);
      await again!.release();
      // A lease of 1 s: still held when b asks right after, on a loaded machine too; run out 1.5 s later.
      const lost = await unstorageDriver({ storage: dying.storage, lockLeaseMs: 1000, key: "c" }).lock("x.lock");
      expect(lost).toBeDefined();
      dying.die();
      expect(await b.lock("x.lock")).toBeUndefined();
      await sleep(1500);
      const taken = await b.lock("x.lock");
      expect(taken).toBeDefined();
      await taken!.release();
    });

    it("resumes every consumer exactly after a restart of the storage", async () => {
      const ctx = await setup();
      let driver = unstorageDriver({ storage: ctx.storage });
      const q = await QueueWriter.open("jobs", { driver, durability: "none", maxPartBytes: 2000 });
      await q.pushBatch(Array.from({ length: 200 }, (_, i) => `job-${i}`));
      const commits = { c1: 0, c2: 37, c3: 120, c4: 200 };
      for (const [name, n] of Object.entries(commits)) {
        const c = await QueueConsumer.open("jobs", name, { driver });
        let read = 0;
        while (read < n) {
          const batch = await c.read({ max: Math.min(50, n - read) });
          read += batch.length;
          await c.commit();
        }
        await c.read({ max: 7 }); // handed out, not committed
        await c.close();
      }
      await q.close();
      driver = unstorageDriver({ storage: await ctx.reopenStorage() });
      const writer = track(await QueueWriter.open("jobs", { driver, durability: "none" }));
      await writer.push("job-200");
      for (const [name, n] of Object.entries(commits)) {
        const c = track(await QueueConsumer.open("jobs", name, { driver, create: false }));
        const got = await c.read({ max: 1000 });
        expect(got.map((m) => m.data)).toEqual(Array.from({ length: 201 - n }, (_, i) => `job-${i + n}`));
      }
    });
  });
}

/** The storage, recording the keys written; it can "die" (every call hangs) like a killed process. */
function spyOn(storage: UnstorageLike, crash: { dieAfterChunk?: boolean; torn?: boolean } = {}) {
  const writes: string[] = [];
  let dead = false;
  let onDeath = () => {};
  const died = new Promise<void>((resolve) => (onDeath = resolve));
  const hang = () => new Promise<never>(() => {});
  const die = () => {
    dead = true;
    onDeath();
  };
  const wrapped: UnstorageLike = {
    hasItem: ((key: string) => (dead ? hang() : storage.hasItem(key))) as UnstorageLike["hasItem"],
    getItemRaw: ((key: string) => (dead ? hang() : storage.getItemRaw(key))) as UnstorageLike["getItemRaw"],
    getKeys: ((base?: string) => (dead ? hang() : storage.getKeys(base))) as UnstorageLike["getKeys"],
    removeItem: ((key: string) => (dead ? hang() : storage.removeItem(key))) as UnstorageLike["removeItem"],
    setItemRaw: (async (key: string, value: Uint8Array) => {
      if (dead) return hang();
      writes.push(key);
      if (crash.dieAfterChunk && /~\d{15}$/.test(key)) {
        await storage.setItemRaw(key, crash.torn ? value.slice(0, 20) : value);
        die();
        return hang();
      }
      return storage.setItemRaw(key, value);
    }) as UnstorageLike["setItemRaw"],
  };
  return { storage: wrapped, writes, die, dead: died };
}

function bytes(value: unknown): Uint8Array {
  if (value instanceof Uint8Array) return value;
  throw new Error(`expected bytes, got ${typeof value}`);
}
