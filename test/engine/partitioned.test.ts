import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/driver";
import { QueueConsumer, QueueWriter, openQueue } from "../../src/index";
import { declarePartitions, partitionOfKey, readPartitions } from "../../src/partitions";
import { PartitionedWriter } from "../../src/partitioned-writer";

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

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
    "fs",
    () => {
      const dir = mkdtempSync(join(tmpdir(), "vq-partitioned-"));
      dirs.push(dir);
      return { driver: fsDriver({ dir }), again: () => fsDriver({ dir }) };
    },
  ],
];

const quiet = { durability: "none", onProblem: () => {} } as const;

/** Every message of partition `index`, in order, read as an ordinary queue. */
async function readPartition(driver: QueueDriver, queue: string, index: number): Promise<string[]> {
  const consumer = await QueueConsumer.open(`${queue}.p${index}`, `check-${Math.random().toString(36).slice(2)}`, { driver, syncCommits: false }).catch(() => undefined);
  if (!consumer) return [];
  const out: string[] = [];
  for (let batch = await consumer.read({ max: 1000 }); batch.length > 0; batch = await consumer.read({ max: 1000 })) out.push(...batch.map((m) => m.data as string));
  await consumer.close();
  return out;
}

describe.each(drivers)("partitioned queues on %s", (_name, make) => {
  describe("declaration", () => {
    it("is idempotent, refuses another count, an ordinary queue and bad counts or names", async () => {
      const { driver } = make();
      await declarePartitions(driver, "orders", 4);
      await declarePartitions(driver, "orders", 4);
      expect(await readPartitions(driver, "orders")).toBe(4);
      await expect(declarePartitions(driver, "orders", 3)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("declared with 4 partitions") });
      await expect(PartitionedWriter.open("orders", { driver, partitions: 5 })).rejects.toMatchObject({ code: "E_OPTION" });
      await (await QueueWriter.open("plain", { driver })).close();
      await expect(declarePartitions(driver, "plain", 2)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("ordinary queue") });
      for (const bad of [0, -1, 1.5, 1025, "3"]) await expect(declarePartitions(driver, "x", bad as number)).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(declarePartitions(driver, "a_info_b", 2)).rejects.toMatchObject({ code: "E_NAME" });
      await expect(declarePartitions(driver, "q".repeat(127), 20)).rejects.toMatchObject({ code: "E_NAME" });
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
          else expect(mine).toEqual(Array.from({ length: 4 }, (_, j) => [`${key}-${j * 5 + keys.indexOf(key)}-a`, `${key}-${j * 5 + keys.indexOf(key)}-b`]).flat());
        }
      }
      await expect(writer.produce(["x"])).rejects.toMatchObject({ code: "E_CLOSED" });
    });

    it("spreads batches without a key over the partitions it holds, and refuses bad partition keys", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("spread", { driver, partitions: 3, ...quiet });
      const first = await writer.produce(["m0"]);
      expect(writer.held()).toEqual([first.partition]);
      // Only the held partition takes unkeyed batches; a keyed one adds its partition to the rotation.
      const other = [0, 1, 2].find((p) => p !== first.partition)!;
      const key = Array.from({ length: 100 }, (_, i) => `k${i}`).find((k) => partitionOfKey(k, 3) === other)!;
      await writer.produce(["keyed"], { partitionKey: key });
      expect(writer.held()).toEqual([first.partition, other].sort());
      const partitions = new Set<number>();
      for (let i = 1; i < 7; i++) partitions.add((await writer.produce([`m${i}`])).partition);
      expect([...partitions].sort()).toEqual([first.partition, other].sort());
      for (const bad of ["", 5, {}, "x".repeat(1025)]) await expect(writer.produce(["x"], { partitionKey: bad as string })).rejects.toMatchObject({ code: "E_OPTION" });
      await writer.close();
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
      const result = await writer.produce(["soon"], { partitionKey: "k", delayMs: 50 });
      expect(result.until).toBeGreaterThan(Date.now() - 1000);
      await new Promise((resolve) => setTimeout(resolve, 300));
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

    it("gives up a hand-over request after handoffTimeoutMs (E_LOCKED)", async () => {
      const { driver, again } = make();
      await declarePartitions(driver, "stuck", 1);
      // An ordinary writer of the partition: it never reads markers.
      const holder = await QueueWriter.open("stuck.p0", { driver, ...quiet });
      const writer = await PartitionedWriter.open("stuck", { driver: again(), handoffTimeoutMs: 100, ...quiet });
      const started = Date.now();
      await expect(writer.produce(["x"])).rejects.toMatchObject({ code: "E_LOCKED", message: expect.stringContaining("handoffTimeoutMs") });
      expect(Date.now() - started).toBeGreaterThanOrEqual(90);
      await holder.close();
      expect((await writer.produce(["x"])).partition).toBe(0);
      await writer.close();
    });

    it("lets go of a partition it did not use for idleMs", async () => {
      const { driver } = make();
      const writer = await PartitionedWriter.open("idle", { driver, partitions: 2, idleMs: 150, ...quiet });
      await writer.produce(["x"], { partitionKey: "k" });
      expect(writer.held()).toHaveLength(1);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(writer.held()).toEqual([]);
      await writer.close();
    });
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
