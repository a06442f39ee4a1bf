// Over 300 lines: the engine's partitioned-queue tests (writers, both consumer kinds, hand-overs)
// share their fixtures; the multi-process ones live in partitioned-multi.test.ts.
import { describe, expect, it, vi } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { createStorage } from "unstorage";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer, QueueWriter, VQueueError, deleteQueue, inspectQueue, listQueues, openQueue, storageOverview } from "../../src/index";
import { declarePartitions, partitionOfKey, readPartitions } from "../../src/partitions/declaration";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { PartitionedConsumer, type PartitionedMessage } from "../../src/consumers/ordered/partitioned";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { parsePartitionedCursor } from "../../src/partitions/cursor";
import { writerLockPath } from "../../src/storage/paths";
import { cursorAfter } from "../../src/format/position";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-partitioned-");

let stores = 0;
/** A driver factory per test: `again()` gives another instance on the same storage (another "handle"). */
const drivers: [string, () => { driver: QueueDriver; again: () => QueueDriver }][] = [
  [
    "memory",
    () => {
      const name = `partitioned-${++stores}`;
      return { driver: memoryDriver({ name }), again: () => memoryDriver({ name }) };
    },
  ],
  [
    "unstorage (memory)",
    () => {
      const storage = createStorage();
      return { driver: unstorageDriver({ storage }), again: () => unstorageDriver({ storage }) };
    },
  ],
  [
    "fs",
    () => {
      const dir = tempDir();
      return { driver: fsDriver({ dir }), again: () => fsDriver({ dir }) };
    },
  ],
];

const quiet = { durability: "none", onProblem: () => {} } as const;

/** Every message of partition `index`, in order, read as an ordinary queue. */
async function readPartition(driver: QueueDriver, queue: string, index: number): Promise<string[]> {
  const consumer = await QueueConsumer.open(`${queue}.p${index}`, `check-${Math.random().toString(36).slice(2)}`, { driver, syncCommits: false }).catch(
    () => undefined,
  );
  if (!consumer) return [];
  const out: string[] = [];
  for (let batch = await consumer.read({ max: 1000 }); batch.length > 0; batch = await consumer.read({ max: 1000 }))
    out.push(...batch.map((m) => m.data as string));
  await consumer.close();
  return out;
}

/** A driver whose locks the test can declare lost, as a lease driver does when another holder took over. */
function losableLocks(base: QueueDriver): { driver: QueueDriver; lost: Map<string, AbortController> } {
  const lost = new Map<string, AbortController>();
  const driver: QueueDriver = {
    ...base,
    async lock(path) {
      const lock = await base.lock(path);
      if (!lock) return undefined;
      const controller = new AbortController();
      lost.set(path, controller);
      return { release: () => lock.release(), lost: controller.signal };
    },
  };
  return { driver, lost };
}

describe.each(drivers)("partitioned queues on %s", (_name, make) => {
  describe("declaration", () => {
    it("is idempotent, refuses another count, an ordinary queue and bad counts or names", async () => {
      const { driver } = make();
      await declarePartitions(driver, "orders", 4);
      await declarePartitions(driver, "orders", 4);
      expect(await readPartitions(driver, "orders")).toBe(4);
      await expect(declarePartitions(driver, "orders", 3)).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("declared with 4 partitions"),
      });
      await expect(PartitionedWriter.open("orders", { driver, partitions: 5 })).rejects.toMatchObject({ code: "E_OPTION" });
      await (await QueueWriter.open("plain", { driver })).close();
      await expect(declarePartitions(driver, "plain", 2)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("ordinary queue") });
      for (const bad of [0, -1, 1.5, 1025, "3"]) await expect(declarePartitions(driver, "x", bad as number)).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(declarePartitions(driver, "a_info_b", 2)).rejects.toMatchObject({ code: "E_NAME" });
      await expect(declarePartitions(driver, "q".repeat(127), 20)).rejects.toMatchObject({ code: "E_NAME" });
    });

    it("declarations racing (instances starting together) all succeed; one waits out a lock held a moment; an ordinary queue's open writer is refused as such", async () => {
      const { driver, again } = make();
      const racers = [driver, again(), again(), again()];
      await Promise.all(racers.map((d) => declarePartitions(d, "together", 4)));
      expect(await readPartitions(driver, "together")).toBe(4);
      await Promise.all(racers.map((d) => PartitionedWriter.open("opened", { driver: d, partitions: 3, ...quiet }).then((w) => w.close())));
      expect(await readPartitions(driver, "opened")).toBe(3);

      // A lock held for a moment (another declaration, slow storage): waited for, not refused.
      const held = (await again().lock(writerLockPath("later")))!;
      const released = sleep(300).then(() => held.release());
      await declarePartitions(driver, "later", 2);
      await released;
      expect(await readPartitions(driver, "later")).toBe(2);

      const writer = await QueueWriter.open("busy", { driver: again(), ...quiet });
      await writer.push("x");
      await expect(declarePartitions(driver, "busy", 2)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("ordinary queue") });
      await writer.close();
    });

    it("opens a declared queue, declares from the options, refuses an undeclared one", async () => {
      const { driver } = make();
      await expect(PartitionedWriter.open("none", { driver })).rejects.toMatchObject({ code: "E_NOT_FOUND" });
      const writer = await PartitionedWriter.open("made", { driver, partitions: 3, ...quiet });
      expect(writer.partitions).toBe(3);
      await writer.close();
      const again = await PartitionedWriter.open("made", { driver, ...quiet });
      expect(again.partitions).toBe(3);
      await again.close();
      // Consumers declare too; their options are checked at open, whatever partitions exist.
      await (await PartitionedConsumer.open("fresh", "c", { driver, partitions: 2 })).close();
      expect(await readPartitions(driver, "fresh")).toBe(2);
      await expect(PartitionedSharedConsumer.open("fresh", "w", { driver, partitions: 3 })).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(PartitionedSharedConsumer.open("fresh", "w", { driver, leaseMs: 0 })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("leaseMs"),
      });
      await expect(PartitionedConsumer.open("fresh", "c", { driver, handoffGraceMs: -5 })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining("handoffGraceMs"),
      });
      for (const bad of [{ minHoldMs: -1 }, { idleMs: "x" }, { handoffTimeoutMs: 1.5 }]) {
        await expect(PartitionedWriter.open("made", { driver, ...(bad as object) })).rejects.toMatchObject({ code: "E_OPTION" });
      }
    });

    it("refuses to open a partitioned queue's name as an ordinary queue", async () => {
      const { driver } = make();
      await declarePartitions(driver, "orders", 2);
      await expect(openQueue("orders", { driver })).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("PartitionedWriter") });
      // Nothing was made over it: it can still be written as declared.
      const writer = await PartitionedWriter.open("orders", { driver, ...quiet });
      await writer.produce(["a"], { partitionKey: "k" });
      await writer.close();
    });
  });

  describe("writer", () => {
    it("sends a key's batches, whole, to its partition, in order", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("orders", { driver, partitions: 4, ...quiet });
      const keys = ["alice", "bob", "carol", "dave", "erin"];
      for (let i = 0; i < 20; i++) {
        const key = keys[i % keys.length]!;
        const result = await writer.produce([`${key}-${i}-a`, `${key}-${i}-b`], { partitionKey: key });
        expect(result.partition).toBe(partitionOfKey(key, 4));
        expect(result.count).toBe(2);
      }
      await writer.close();
      for (let p = 0; p < 4; p++) {
        const got = await readPartition(driver, "orders", p);
        for (const key of keys) {
          const mine = got.filter((m) => m.startsWith(`${key}-`));
          if (partitionOfKey(key, 4) !== p) expect(mine).toEqual([]);
          else
            expect(mine).toEqual(
              Array.from({ length: 4 }, (_, j) => [`${key}-${j * 5 + keys.indexOf(key)}-a`, `${key}-${j * 5 + keys.indexOf(key)}-b`]).flat(),
            );
        }
      }
      await expect(writer.produce(["x"])).rejects.toMatchObject({ code: "E_CLOSED" });
    });

    it("spreads batches without a key over every partition in turn, and refuses bad partition keys", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("spread", { driver, partitions: 3, ...quiet });
      // One batch at a time (nothing taken at once by concurrent produces): each partition in turn, each as often.
      const partitions: number[] = [];
      for (let i = 0; i < 9; i++) partitions.push((await writer.produce([`m${i}`])).partition);
      expect(writer.held()).toEqual([0, 1, 2]);
      for (const index of [0, 1, 2]) expect(partitions.filter((p) => p === index)).toHaveLength(3);
      for (let i = 3; i < 9; i++) expect(partitions[i]).toBe(partitions[i - 3]);
      for (const bad of ["", 5, {}, "x".repeat(1025)])
        await expect(writer.produce(["x"], { partitionKey: bad as string })).rejects.toMatchObject({ code: "E_OPTION" });
      await writer.close();
      const all = (await Promise.all([0, 1, 2].map((index) => readPartition(driver, "spread", index)))).flat();
      expect(all.sort()).toEqual(Array.from({ length: 9 }, (_, i) => `m${i}`).sort());
    });

    it(
      "shares the partitions between instances producing batches without a key: one that came when all were held asks for its share",
      { timeout: 40_000 },
      async () => {
        const { driver, again } = make();
        const a = await PartitionedWriter.open("balance", { driver, partitions: 4, minHoldMs: 0, ...quiet });
        for (let i = 0; i < 4; i++) await a.produce([`a${i}`]);
        expect(a.held()).toEqual([0, 1, 2, 3]);
        // a also writes batches with a key to one partition: that one is not given up for b's share.
        const keyed = partitionOfKey("customer-1", 4);
        const b = await PartitionedWriter.open("balance", { driver: again(), minHoldMs: 0, ...quiet });
        // Both produce, a batch at a time each, until b holds its share (2 of 4) or 20 s pass (a slow runtime).
        const byB = new Set<number>();
        const deadline = Date.now() + 20_000;
        let produced = 0;
        while (b.held().length < 2 && Date.now() < deadline) {
          await a.produce([`a-${produced}`]);
          await a.produce([`k-${produced}`], { partitionKey: "customer-1" });
          byB.add((await b.produce([`b-${produced}`])).partition);
          produced++;
          await sleep(5);
        }
        expect(b.held()).toHaveLength(2);
        expect(b.held()).not.toContain(keyed);
        // And no more, nothing passed back and forth: a keeps its share, its keyed partition among it.
        // (b, holding none at first, asked for one at random, which may be a's keyed one: handed back once.)
        const handedOver = [a.handedOver, b.handedOver];
        for (let i = 0; i < 100; i++) {
          await a.produce([`a-after-${i}`]);
          await a.produce([`k-after-${i}`], { partitionKey: "customer-1" });
          byB.add((await b.produce([`b-after-${i}`])).partition);
        }
        expect(a.held()).toHaveLength(2);
        expect(a.held()).toContain(keyed);
        expect(b.held()).toHaveLength(2);
        expect([a.handedOver, b.handedOver]).toEqual(handedOver);
        await Promise.all([a.close(), b.close()]);
      },
    );

    it("takes no new partition for batches without a key while one it holds goes unused (a slow producer keeps its writers)", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("slow", { driver, partitions: 4, idleMs: 2000, ...quiet });
      await writer.produce(["a"]);
      await writer.produce(["b"]);
      expect(writer.held()).toHaveLength(2);
      // Past idleMs / 2 unused: the next batches go to those two, no third writer is opened (until
      // both are in use again: a producer of r batches a second keeps about r * idleMs / 2 writers).
      // Well before idleMs, so that a slow machine does not let them go first.
      await sleep(1100);
      const held = writer.held();
      const first = (await writer.produce(["c0"])).partition;
      const second = (await writer.produce(["c1"])).partition;
      expect([first, second].sort()).toEqual(held);
      expect(writer.held()).toEqual(held);
      await writer.close();
    });

    it("sends a batch without a key elsewhere when a free partition cannot be opened, and says so (PARTITION_SKIPPED)", async () => {
      const { driver: base } = make();
      // A storage fault on partition 1's writer lock alone (a path a real fault does not pick).
      const driver: QueueDriver = {
        ...base,
        async lock(path) {
          if (path.startsWith("broken.p1")) throw new VQueueError("E_IO", `injected: cannot lock ${path}`);
          return base.lock(path);
        },
      };
      const problems: string[] = [];
      const writer = await PartitionedWriter.open("broken", {
        driver,
        partitions: 3,
        durability: "none",
        onProblem: (problem) => problems.push(`${problem.code} ${problem.queue}`),
      });
      const partitions: number[] = [];
      for (let i = 0; i < 6; i++) partitions.push((await writer.produce([`m${i}`])).partition);
      expect(partitions).not.toContain(1);
      expect(new Set(partitions)).toEqual(new Set([0, 2]));
      expect(problems).toContain("PARTITION_SKIPPED broken.p1");
      // Keyed to it: the fault is the batch's own, refused as before.
      const key = Array.from({ length: 100 }, (_, i) => `k${i}`).find((k) => partitionOfKey(k, 3) === 1)!;
      await expect(writer.produce(["keyed"], { partitionKey: key })).rejects.toMatchObject({ code: "E_IO" });
      await writer.close();
    });

    it("passes over, for batches without a key, the partitions another instance holds; holding none, asks for one", async () => {
      const { driver, again } = make();
      const a = await PartitionedWriter.open("shared-spread", { driver, partitions: 4, minHoldMs: 0, ...quiet });
      for (let i = 0; i < 4; i++) await a.produce([`a${i}`]);
      expect(a.held()).toEqual([0, 1, 2, 3]);
      // Every partition is held by a: b asks for one, and a hands it over.
      const b = await PartitionedWriter.open("shared-spread", { driver: again(), minHoldMs: 0, ...quiet });
      const taken = (await b.produce(["b0"])).partition;
      expect(b.held()).toContain(taken);
      expect(a.handedOver).toBeGreaterThanOrEqual(1);
      // a goes on with what it holds, never into one b holds (b may get a second one meanwhile: its share of 4 among 2).
      for (let i = 4; i < 10; i++) {
        const partition = (await a.produce([`a${i}`])).partition;
        expect(a.held()).toContain(partition);
        expect(b.held()).not.toContain(partition);
      }
      // b writes only where it holds (it may ask for a second partition meanwhile: its share of 4 among 2).
      for (let i = 1; i < 4; i++) expect(b.held()).toContain((await b.produce([`b${i}`])).partition);
      await Promise.all([a.close(), b.close()]);
    });

    it("routes an idempotency key to its partition, so that a retry is written once", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("idem", { driver, partitions: 4, ...quiet });
      const first = await writer.produce(["once"], { key: "order-17" });
      expect(first).toMatchObject({ partition: partitionOfKey("order-17", 4), replayed: false });
      await writer.close();
      const retry = await PartitionedWriter.open("idem", { driver: again(), ...quiet });
      expect(await retry.produce(["once"], { key: "order-17" })).toMatchObject({ partition: first.partition, replayed: true });
      await retry.close();
      expect(await readPartition(driver, "idem", first.partition)).toEqual(["once"]);
    });

    it("writes delayed messages into their partition when due", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("later", { driver, partitions: 2, ...quiet });
      const before = Date.now();
      const result = await writer.produce(["soon"], { partitionKey: "k", delayMs: 50 });
      expect(result.until).toBeGreaterThanOrEqual(before + 50);
      await sleep(300);
      await writer.close();
      expect(await readPartition(driver, "later", result.partition)).toEqual(["soon"]);
    });

    it("hands a partition over on request, after the batch in flight", async () => {
      const { driver, again } = make();
      const a = await PartitionedWriter.open("hot", { driver, partitions: 2, minHoldMs: 50, ...quiet });
      const b = await PartitionedWriter.open("hot", { driver: again(), minHoldMs: 50, ...quiet });
      await a.produce(["a1"], { partitionKey: "k" });
      const inFlight = a.produce(["a2"], { partitionKey: "k" });
      const taken = await b.produce(["b1"], { partitionKey: "k" });
      await inFlight;
      expect(a.held()).toEqual([]);
      expect(b.held()).toEqual([taken.partition]);
      expect(a.handedOver).toBe(1);
      // And back: both keep acknowledged order.
      await a.produce(["a3"], { partitionKey: "k" });
      expect(await readPartition(driver, "hot", taken.partition)).toEqual(["a1", "a2", "b1", "a3"]);
      await Promise.all([a.close(), b.close()]);
    });

    it("asks once for a partition that concurrent produces all need", async () => {
      const { driver, again } = make();
      const a = await PartitionedWriter.open("many", { driver, partitions: 2, ...quiet });
      const b = await PartitionedWriter.open("many", { driver: again(), partitions: 2, ...quiet });
      await a.produce(["a"], { partitionKey: "k" });
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => b.produce([`b${i}`], { partitionKey: "k" })));
      expect(new Set(results.map((r) => r.partition))).toEqual(new Set([partitionOfKey("k", 2)]));
      expect(a.handedOver).toBe(1);
      await Promise.all([a.close(), b.close()]);
      expect((await readPartition(driver, "many", partitionOfKey("k", 2))).sort()).toEqual(["a", "b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7"]);
    });

    it("drops a partition's writer that lost its lock before writing with it, and opens it again (QueueWriter.holds)", async () => {
      const { driver: base } = make();
      const { driver, lost } = losableLocks(base);
      const writer = await PartitionedWriter.open("fenced", { driver, partitions: 2, ...quiet });
      const { partition } = await writer.produce(["before"], { partitionKey: "k" });
      const first = lost.get(`fenced.p${partition}_queue.lock`)!;
      first.abort(new VQueueError("E_FENCED", "taken over"));
      // Known lost before the write: nothing was written with it; the lock is free again here, so the produce goes through a new writer.
      expect(await writer.produce(["next"], { partitionKey: "k" })).toMatchObject({ partition });
      expect(lost.get(`fenced.p${partition}_queue.lock`)).not.toBe(first);
      await writer.close();
      expect(await readPartition(base, "fenced", partition)).toEqual(["before", "next"]);
    });

    it("reports each partition writer's lost lock once, as soon as the lock says so, whether or not a produce comes after (onLockLost)", async () => {
      const { driver: base } = make();
      const { driver, lost } = losableLocks(base);
      const lostOnes: number[] = [];
      const writer = await PartitionedWriter.open("counted", { driver, partitions: 2, onLockLost: (p) => lostOnes.push(p), ...quiet });
      const { partition } = await writer.produce(["before"], { partitionKey: "k" });
      expect(lostOnes).toEqual([]);
      // Found by a renewal while nothing is written (an instance resumed after a pause): reported at once.
      lost.get(`counted.p${partition}_queue.lock`)!.abort(new VQueueError("E_LOCKED", "taken over"));
      expect(lostOnes).toEqual([partition]);
      // The produce that finds it lost before writing does not report it again, and goes on with a new writer.
      expect(await writer.produce(["next"], { partitionKey: "k" })).toMatchObject({ partition });
      expect(lostOnes).toEqual([partition]);
      await writer.close();
      expect(lostOnes).toEqual([partition]);
    });

    it("gives up a hand-over request after handoffTimeoutMs (E_LOCKED)", async () => {
      const { driver, again } = make();
      await declarePartitions(driver, "stuck", 1);
      // An ordinary writer of the partition: it never reads markers.
      const holder = await QueueWriter.open("stuck.p0", { driver, ...quiet });
      const writer = await PartitionedWriter.open("stuck", { driver: again(), handoffTimeoutMs: 100, ...quiet });
      const started = Date.now();
      await expect(writer.produce(["x"])).rejects.toMatchObject({ code: "E_LOCKED", message: expect.stringContaining("handoffTimeoutMs") });
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
      await writer.close();
      // A request in flight ends with the writer's close (a timeout it cannot reach first, on a loaded machine too).
      const patient = await PartitionedWriter.open("stuck", { driver: again(), handoffTimeoutMs: 60_000, ...quiet });
      const waiting = patient.produce(["y"], { partitionKey: "k" });
      await sleep(20);
      await patient.close();
      await expect(waiting).rejects.toMatchObject({ code: "E_CLOSED" });
      await holder.close();
      const reopened = await PartitionedWriter.open("stuck", { driver: again(), ...quiet });
      expect((await reopened.produce(["x"])).partition).toBe(0);
      await reopened.close();
    });

    it("lets go of a partition it did not use for idleMs", async () => {
      const { driver } = make();
      // 1 s: both produces land within it at a load of 4 (at 150 ms, one at load 14 came after the first partition was let go).
      const writer = await PartitionedWriter.open("idle", { driver, partitions: 2, idleMs: 1000, ...quiet });
      await writer.produce(["x"], { partitionKey: "k" });
      // A partition with delayed messages pending is kept: its writer moves them when due.
      const other = Array.from({ length: 50 }, (_, i) => `d${i}`).find((key) => partitionOfKey(key, 2) !== partitionOfKey("k", 2))!;
      await writer.produce(["later"], { partitionKey: other, delayMs: 60_000 });
      expect(writer.held()).toHaveLength(2);
      await sleep(1200);
      // The release runs on its own: given time on a slow machine.
      await vi.waitFor(() => expect(writer.held()).toEqual([partitionOfKey(other, 2)]), { timeout: 10_000, interval: 50 });
      await writer.close();
    });
  });

  describe("ordered consumer", () => {
    it("reads every partition, each in order, and commits by composite cursor", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("orders", { driver, partitions: 3, ...quiet });
      const keys = ["a", "b", "c", "d", "e", "f"];
      for (let i = 0; i < 60; i++) await writer.produce([`${keys[i % 6]}:${i}`], { partitionKey: keys[i % 6] });
      const consumer = await PartitionedConsumer.open("orders", "billing", { driver: again(), syncCommits: false });
      expect(consumer.held()).toEqual([0, 1, 2].filter((p) => keys.some((k) => partitionOfKey(k, 3) === p)));
      const first = await consumer.poll({ max: 9, timeoutMs: 1000 });
      expect(first).toHaveLength(9);
      // An answer is filled from one partition, then the next (fewer positions to commit): each partition's messages together.
      const runs = first.map((m) => m.partition).filter((p, i, all) => i === 0 || all[i - 1] !== p);
      expect(new Set(runs).size).toBe(runs.length);
      const cursor = consumer.cursor;
      expect(cursor).toMatch(/^p\d:\d+\.\d+\.\d+(,p\d:\d+\.\d+\.\d+)*$/);
      expect([...parsePartitionedCursor(cursor, 3).keys()]).toEqual([...new Set(first.map((m) => m.partition))].sort());
      await consumer.commit(cursor);
      await consumer.close();
      // Reopened: goes on after the cursor, nothing skipped, nothing twice; per key in order.
      const again2 = await PartitionedConsumer.open("orders", "billing", { driver: again(), syncCommits: false });
      const rest: PartitionedMessage[] = [];
      const firstOfEach: number[] = [];
      for (let batch = await again2.poll({ max: 7, timeoutMs: 200 }); batch.length > 0; batch = await again2.poll({ max: 7, timeoutMs: 200 })) {
        firstOfEach.push(batch[0]!.partition);
        rest.push(...batch);
      }
      // The start turns with each answer: every held partition had its turn first.
      expect(new Set(firstOfEach.slice(0, 6)).size).toBe(again2.held().length);
      const all = [...first, ...rest].map((m) => m.data as string);
      expect(all.sort()).toEqual(Array.from({ length: 60 }, (_, i) => `${keys[i % 6]}:${i}`).sort());
      for (const key of keys) {
        const seen = [...first, ...rest]
          .map((m) => m.data as string)
          .filter((m) => m.startsWith(`${key}:`))
          .map((m) => Number(m.split(":")[1]));
        expect(seen).toEqual([...seen].sort((x, y) => x - y));
      }
      expect(await again2.lag()).toBe(51);
      await again2.commit();
      expect(await again2.lag()).toBe(0);
      await again2.close();
      await writer.close();
    });

    it("wakes a waiting poll on a produce, and ends it on close", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("wake", { driver, partitions: 2, ...quiet });
      await writer.produce(["first"], { partitionKey: "k" });
      const consumer = await PartitionedConsumer.open("wake", "c", { driver: again(), syncCommits: false });
      expect((await consumer.poll()).map((m) => m.data)).toEqual(["first"]);
      const waiting = consumer.poll();
      await sleep(50);
      await writer.produce(["second"], { partitionKey: "k" });
      expect((await waiting).map((m) => m.data)).toEqual(["second"]);
      const forever = consumer.poll();
      await sleep(50);
      await consumer.close();
      expect(await forever).toEqual([]);
      await writer.close();
    });

    it("rewinds every partition held to its saved position", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("rw", { driver, partitions: 3, ...quiet });
      for (let i = 0; i < 9; i++) await writer.produce([`m${i}`], { partitionKey: `k${i}` });
      await writer.close();
      const consumer = await PartitionedConsumer.open("rw", "c", { driver, syncCommits: false });
      const first = await consumer.poll({ max: 3 });
      await consumer.commit(first[0]!);
      const rest = await consumer.poll({ max: 100 });
      await consumer.rewind();
      const again = await consumer.poll({ max: 100 });
      expect(again.map((m) => m.data).sort()).toEqual([...first.slice(1), ...rest].map((m) => m.data).sort());
      expect(consumer.takeMissed()).toBe(0);
      await consumer.close();
    });

    it("drops a partition whose lock was lost, and takes it again once it is free", async () => {
      const { driver: base } = make();
      const { driver, lost } = losableLocks(base);
      const writer = await PartitionedWriter.open("lost", { driver: base, partitions: 2, ...quiet });
      await writer.produce(["a1", "a2"], { partitionKey: "k" });
      const consumer = await PartitionedConsumer.open("lost", "c", { driver, syncCommits: false });
      const p = partitionOfKey("k", 2);
      expect(consumer.held()).toEqual([p]);
      expect((await consumer.poll({ max: 1 })).map((m) => m.data)).toEqual(["a1"]);
      lost.get(`lost.p${p}_info_pop_c.lock`)!.abort(new VQueueError("E_LOCKED", "lease taken over"));
      // Dropped, and free again (nobody took it): taken back, from its saved position: a1 comes
      // again (never committed), which the consumer that lost its lock would not have given.
      const got: string[] = [];
      for (let i = 0; i < 20 && got.length < 2; i++) got.push(...(await consumer.poll({ max: 10, timeoutMs: 100 })).map((m) => m.data as string));
      expect(got).toEqual(["a1", "a2"]);
      expect(consumer.held()).toEqual([p]);
      await Promise.all([consumer.close(), writer.close()]);
    });

    it("refuses bad cursors", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("cur", { driver, partitions: 2, ...quiet });
      await writer.produce(["x"], { partitionKey: "k" });
      const consumer = await PartitionedConsumer.open("cur", "c", { driver });
      for (const bad of ["", "p0", "p2:0.0.0", "p0:0.0.0,p0:0.0.0", "0:1.2.3", "p0:1.2", "p01:0.0.0", 5]) {
        await expect(consumer.commit(bad as string)).rejects.toMatchObject({ code: "E_CURSOR" });
      }
      await expect(PartitionedConsumer.open("nope", "c", { driver })).rejects.toMatchObject({ code: "E_NOT_FOUND" });
      await consumer.close();
      await writer.close();
    });

    it("hands a partition over to an idle instance once what it handed out is committed", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("ho", { driver, partitions: 1, ...quiet });
      await writer.produce(["m1", "m2", "m3", "m4"]);
      const a = await PartitionedConsumer.open("ho", "c", { driver, syncCommits: false, minHoldMs: 0 });
      const b = await PartitionedConsumer.open("ho", "c", { driver: again(), syncCommits: false, minHoldMs: 0 });
      expect(a.held()).toEqual([0]);
      expect(b.held()).toEqual([]);
      const got = await a.poll({ max: 2 });
      expect(got.map((m) => m.data)).toEqual(["m1", "m2"]);
      // b asks; a keeps it while m1, m2 are not committed.
      expect(await b.poll({ timeoutMs: 300 })).toEqual([]);
      expect(a.handedOver).toBe(0);
      await a.commit(got[1]!);
      const taken = await b.poll({ max: 10, timeoutMs: 3000 });
      expect(taken.map((m) => m.data)).toEqual(["m3", "m4"]);
      expect(a.handedOver).toBe(1);
      expect(a.held()).toEqual([]);
      // A late commit of what a had committed is fine; beyond it, refused.
      await a.commit(got[1]!);
      await expect(a.commit("p0:0.999999.9")).rejects.toMatchObject({ code: "E_CURSOR" });
      await Promise.all([a.close(), b.close(), writer.close()]);
    });

    it("an instance that took every partition before the others came hands what is above its share over at once, minHoldMs or not", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("early", { driver, partitions: 4, ...quiet });
      const keys = [0, 1, 2, 3].map((p) => Array.from({ length: 200 }, (_, i) => `k${i}`).find((k) => partitionOfKey(k, 4) === p)!);
      for (const key of keys) await writer.produce(["x1", "x2", "x3"], { key });
      const a = await PartitionedConsumer.open("early", "c", { driver, syncCommits: false, minHoldMs: 60_000 });
      expect(a.held()).toEqual([0, 1, 2, 3]);
      expect(await a.poll({ max: 1 })).toHaveLength(1);
      await a.commit();
      const b = await PartitionedConsumer.open("early", "c", { driver: again(), syncCommits: false, minHoldMs: 60_000 });
      // Well before minHoldMs (a quarter of it: room for a loaded machine): a held 4 of 4, above any share of 2 instances.
      const started = performance.now();
      const soon = () => performance.now() - started < 15_000;
      let got: PartitionedMessage[] = [];
      while (got.length === 0 && soon()) got = await b.poll({ max: 10, timeoutMs: 200 });
      expect(got.length).toBeGreaterThan(0);
      while (b.held().length < 2 && soon()) await b.poll({ max: 10, timeoutMs: 100 });
      expect(b.held().length).toBeGreaterThanOrEqual(2);
      // Down to its share, a keeps the rest: a young partition at the share's ceiling is not passed on.
      await b.poll({ max: 10, timeoutMs: 300 });
      expect(a.held().length).toBe(2);
      expect(b.held().length).toBe(2);
      await Promise.all([a.close(), b.close(), writer.close()]);
    });

    it("seek moves every partition, or those a composite cursor names, taking each from its holder", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("seeking", { driver, partitions: 2, ...quiet });
      const keys = [0, 1].map((p) => Array.from({ length: 200 }, (_, i) => `k${i}`).find((k) => partitionOfKey(k, 2) === p)!);
      for (const key of keys) await writer.produce([`${key}-1`, `${key}-2`, `${key}-3`], { key });
      const a = await PartitionedConsumer.open("seeking", "c", { driver, syncCommits: false, minHoldMs: 0 });
      const first = await a.poll({ max: 10 });
      expect(first.map((m) => m.data).sort()).toEqual(keys.flatMap((k) => [`${k}-1`, `${k}-2`, `${k}-3`]).sort());
      await a.commit();
      const b = await PartitionedConsumer.open("seeking", "c", { driver: again(), syncCommits: false, minHoldMs: 0 });
      // Both partitions were a's: b asks for them, a lets go (nothing outstanding), b moves them.
      const cursor = await b.seek("earliest");
      expect([...parsePartitionedCursor(cursor, 2).keys()]).toEqual([0, 1]);
      expect([a.held(), b.held()]).toEqual([[], [0, 1]]);
      expect((await b.poll({ max: 10 })).map((m) => m.data).sort()).toEqual(first.map((m) => m.data).sort());
      // A composite cursor moves the partitions it names, to the message after each.
      const afterFirst = first.find((m) => m.data === `${keys[0]}-1`)!;
      expect(await b.seek(`p0:${cursorAfter(afterFirst)}`)).toBe(`p0:${cursorAfter(afterFirst)}`);
      expect((await b.poll({ max: 10 })).map((m) => m.data)).toEqual([`${keys[0]}-2`, `${keys[0]}-3`]);
      await b.seek("latest");
      expect(await b.poll({ timeoutMs: 0 })).toEqual([]);
      // Saved: a consumer of that name opened afresh starts there.
      await b.close();
      await a.close();
      const c = await PartitionedConsumer.open("seeking", "c", { driver, syncCommits: false });
      expect(await c.poll({ timeoutMs: 0 })).toEqual([]);
      expect(await c.lag()).toBe(0);
      // Refused, saying what is allowed: a target of an ordinary queue, a cursor without its partition.
      for (const bad of [{ part: 0, seq: 1 }, "0.0.0", "p2:0.0.0"]) await expect(c.seek(bad as never)).rejects.toMatchObject({ code: "E_CURSOR" });
      await Promise.all([c.close(), writer.close()]);
    });

    it("seek checks every target before it takes anything, and moves nothing when a holder does not let go within handoffTimeoutMs (E_LOCKED)", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("stuck", { driver, partitions: 2, ...quiet });
      const keys = [0, 1].map((p) => Array.from({ length: 200 }, (_, i) => `k${i}`).find((k) => partitionOfKey(k, 2) === p)!);
      for (const key of keys) await writer.produce([`${key}-1`, `${key}-2`], { key });
      const a = await PartitionedConsumer.open("stuck", "c", { driver, syncCommits: false, minHoldMs: 0 });
      const got = await a.poll({ max: 10 });
      expect(got).toHaveLength(4);
      // p1's messages committed, p0's still out: a keeps p0 until they are.
      await a.commit(got.filter((m) => m.partition === 1).at(-1)!);
      const b = await PartitionedConsumer.open("stuck", "c", { driver: again(), syncCommits: false, handoffTimeoutMs: 300 });
      // A well-formed cursor that names no message end, and a time that is none: refused before any partition is asked for.
      await expect(b.seek("p0:0.3.1")).rejects.toMatchObject({ code: "E_CURSOR" });
      await expect(b.seek({ time: "not a time" })).rejects.toMatchObject({ code: "E_CURSOR" });
      expect([a.handedOver, b.held()]).toEqual([0, []]);
      await expect(b.seek("earliest")).rejects.toMatchObject({ code: "E_LOCKED" });
      // Nothing moved, p1 (free, taken by b) included: once a committed the rest, nothing is left to read.
      await a.commit();
      await sleep(300);
      expect(await a.lag()).toBe(0);
      expect(await b.poll({ timeoutMs: 0 })).toEqual([]);
      await Promise.all([a.close(), b.close(), writer.close()]);
    });

    it("a commit taken by an instance that does not hold the partition reaches its holder through the inbox: nothing comes again", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("elsewhere", { driver, partitions: 1, ...quiet });
      await writer.produce(["m1", "m2", "m3", "m4"]);
      const a = await PartitionedConsumer.open("elsewhere", "c", { driver, syncCommits: false, minHoldMs: 0 });
      const problems: string[] = [];
      const b = await PartitionedConsumer.open("elsewhere", "c", {
        driver: again(),
        syncCommits: false,
        minHoldMs: 0,
        handoffGraceMs: 60_000,
        onProblem: (p) => problems.push(p.message),
      });
      expect([a.held(), b.held()]).toEqual([[0], []]);
      const got = await a.poll({ max: 2 });
      // The cursor of a's batch, committed through b (as node-cluster may route the request).
      await b.commit(a.cursor);
      // b asks for the partition: a lets go once the commit reached it (no grace period needed).
      const taken = await b.poll({ max: 10, timeoutMs: 5000 });
      expect(got.map((m) => m.data)).toEqual(["m1", "m2"]);
      expect(taken.map((m) => m.data)).toEqual(["m3", "m4"]);
      // Garbage is refused at once; a cursor that fits the part but names no message end is refused by the holder (and told).
      await expect(a.commit("p0:0.999999.9")).rejects.toMatchObject({ code: "E_CURSOR" });
      const [, position, count] = b.cursor.split(":")[1]!.split(".").map(Number) as [number, number, number];
      await writer.produce(["m5"]);
      await expect(a.commit(`p0:0.${position + 3}.${count + 1}`)).rejects.toMatchObject({ code: "E_CURSOR" }); // inside m5, past what b handed out
      expect(problems).toEqual([expect.stringContaining("was dropped")]);
      // Nothing skipped: m5 comes next.
      expect((await b.poll({ timeoutMs: 0 })).map((m) => m.data)).toEqual(["m5"]);
      await b.commit();
      await Promise.all([a.close(), b.close(), writer.close()]);
    });

    it("hands over uncommitted messages after handoffGraceMs: they come again", async () => {
      const { driver, again } = make();
      const writer = await PartitionedWriter.open("grace", { driver, partitions: 1, ...quiet });
      await writer.produce(["m1", "m2"]);
      const a = await PartitionedConsumer.open("grace", "c", { driver, syncCommits: false, minHoldMs: 0, handoffGraceMs: 200 });
      const b = await PartitionedConsumer.open("grace", "c", { driver: again(), syncCommits: false });
      expect((await a.poll({ max: 1 })).map((m) => m.data)).toEqual(["m1"]);
      expect((await b.poll({ max: 10, timeoutMs: 3000 })).map((m) => m.data)).toEqual(["m1", "m2"]);
      await Promise.all([a.close(), b.close(), writer.close()]);
    });
  });

  it("shared consumer: leases carry their partition; ack and nack go there", async () => {
    const { driver } = make();
    const writer = await PartitionedWriter.open("jobs", { driver, partitions: 3, ...quiet });
    for (let i = 0; i < 30; i++) await writer.produce([`j${i}`], { partitionKey: `k${i}` });
    const shared = await PartitionedSharedConsumer.open("jobs", "workers", { driver, syncCommits: false });
    const seen = new Map<string, number>();
    for (let round = 0; round < 20 && seen.size < 30; round++) {
      for (const lease of await shared.poll({ max: 8, timeoutMs: 200 })) {
        expect(lease.partition).toBe(partitionOfKey(`k${(lease.data as string).slice(1)}`, 3));
        seen.set(lease.data as string, (seen.get(lease.data as string) ?? 0) + 1);
        if (seen.get(lease.data as string) === 1 && Number((lease.data as string).slice(1)) % 5 === 0) await shared.nack(lease);
        else await shared.ack(lease);
      }
    }
    expect(seen.size).toBe(30);
    expect(
      [...seen]
        .filter(([, n]) => n === 2)
        .map(([d]) => d)
        .sort(),
    ).toEqual(["j0", "j10", "j15", "j20", "j25", "j5"]);
    await expect(shared.ack({ part: 0, offset: 0, lease: 1, partition: 7 })).rejects.toMatchObject({ code: "E_LEASE" });
    // Many at once: one write per partition; a bad lease has its own error.
    for (let i = 30; i < 40; i++) await writer.produce([`j${i}`], { partitionKey: `k${i}` });
    const leases = await shared.poll({ max: 10, timeoutMs: 1000 });
    expect(leases).toHaveLength(10);
    const settled = await shared.ackAll([...leases, { part: 0, offset: 0, lease: 1, partition: -1 }]);
    expect(settled.slice(0, 10)).toEqual(Array.from({ length: 10 }, () => undefined));
    expect(settled[10]).toMatchObject({ code: "E_LEASE" });
    expect(await shared.lag()).toBe(0);
    await shared.close();
    await writer.close();
  });

  it("lists a partitioned queue as itself, its partitions under it, totals and lag summed", async () => {
    const { driver } = make();
    await (await QueueWriter.open("plain", { driver, ...quiet })).close();
    const writer = await PartitionedWriter.open("orders", { driver, partitions: 3, ...quiet });
    for (let i = 0; i < 10; i++) await writer.produce([`m${i}`, `n${i}`], { partitionKey: `k${i}` });
    await writer.close();
    // An ordinary queue whose name looks like a partition of an undeclared queue stays on top.
    await (await QueueWriter.open("other.p0", { driver, ...quiet })).close();
    const consumer = await PartitionedConsumer.open("orders", "billing", { driver, syncCommits: false });
    await consumer.commit((await consumer.poll({ max: 5 })).at(-1)!);
    await consumer.close();

    expect(await listQueues(driver)).toEqual(["orders", "other.p0", "plain"]);
    const stats = (await inspectQueue(driver, "orders"))!;
    expect(stats).toMatchObject({ name: "orders", partitions: 3, messages: 20 });
    expect(stats.partitionQueues!.map((q) => q.name)).toEqual(
      ["orders.p0", "orders.p1", "orders.p2"].filter((_, p) => Array.from({ length: 10 }, (_, i) => partitionOfKey(`k${i}`, 3)).includes(p)),
    );
    expect(stats.partitionQueues!.reduce((sum, q) => sum + q.messages, 0)).toBe(20);
    const billing = stats.consumers.find((c) => c.name === "billing")!;
    expect(billing.lag).toBe(stats.partitionQueues!.reduce((sum, q) => sum + (q.consumers.find((c) => c.name === "billing")?.lag ?? q.messages), 0));
    expect(billing.lag).toBeLessThan(20);

    const overview = await storageOverview(driver);
    expect(overview.map((q) => q.name)).toEqual(["orders", "other.p0", "plain"]);
    const orders = overview[0]!;
    expect(orders).toMatchObject({ partitions: 3 });
    expect(orders.totals.messages).toBe(20);
    expect(orders.partitionQueues!.map((q) => q.name)).toEqual(stats.partitionQueues!.map((q) => q.name));
    expect(orders.consumers.find((c) => c.name === "billing")!.lag).toBe(billing.lag);
    expect((await storageOverview(driver, { include: (q) => q === "orders" })).map((q) => [q.name, q.partitionQueues?.length])).toEqual([
      ["orders", stats.partitionQueues!.length],
    ]);
  });

  it("deletes a partitioned queue: every partition, then the declaration (refused while a partition is open)", async () => {
    const { driver, again } = make();
    const writer = await PartitionedWriter.open("gone", { driver, partitions: 3, ...quiet });
    for (let i = 0; i < 6; i++) await writer.produce([`m${i}`], { partitionKey: `k${i}` });
    const consumer = await PartitionedConsumer.open("gone", "c", { driver: again(), syncCommits: false });
    await expect(deleteQueue(driver, "gone")).rejects.toMatchObject({ code: "E_LOCKED" });
    await Promise.all([writer.close(), consumer.close()]);
    const result = await deleteQueue(driver, "gone");
    expect(result).toMatchObject({ queue: "gone", consumers: ["c"] });
    expect(result.parts).toBeGreaterThan(0);
    expect(await readPartitions(driver, "gone")).toBeUndefined();
    expect((await driver.list("")).filter((entry) => entry.startsWith("gone"))).toEqual([]);
    // A writer opened before the delete makes nothing under the deleted queue's names.
    const late = await PartitionedWriter.open("gone2", { driver, partitions: 2, ...quiet });
    await deleteQueue(driver, "gone2");
    await expect(late.produce(["x"])).rejects.toMatchObject({ code: "E_NOT_FOUND" });
    await late.close();
    expect((await driver.list("")).filter((entry) => entry.startsWith("gone2"))).toEqual([]);
  });

  it("keeps each partition an ordinary queue, readable as one", async () => {
    const { driver } = make();
    const writer = await PartitionedWriter.open("compat", { driver, partitions: 2, ...quiet });
    const { partition } = await writer.produce(["plain"], { partitionKey: "k" });
    await writer.close();
    const consumer = await QueueConsumer.open(`compat.p${partition}`, "rust-like", { driver });
    expect((await consumer.read()).map((m) => m.data)).toEqual(["plain"]);
    await consumer.close();
  });
});
