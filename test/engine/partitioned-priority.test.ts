// Priorities on a partitioned queue: each partition leases its higher priorities first, and a
// poll serves the partitions that hold a higher priority first (docs/work-queues.md#priorities).
import { expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";

const quiet = { durability: "none", onProblem: () => {} } as const;

it("a high-priority message in one partition is leased before the backlogs of all partitions", async () => {
  const driver = memoryDriver({ name: "partitioned-priority" });
  const writer = await PartitionedWriter.open("pq", { driver, partitions: 4, ...quiet });
  for (let k = 0; k < 40; k++)
    await writer.produce(
      Array.from({ length: 100 }, (_, i) => `low-${k}-${i}`),
      { partitionKey: `key-${k}` },
    );
  const consumer = await PartitionedSharedConsumer.open("pq", "s", { driver, syncCommits: false, onProblem: () => {} });
  try {
    const first = await consumer.poll({ max: 8, timeoutMs: 5000 });
    expect(first.length).toBeGreaterThan(0);
    await consumer.ackAll(first);
    await writer.produce(["urgent"], { priority: 200, partitionKey: "key-7" });
    // Found at its partition's next turn: within as many polls as there are partitions.
    let found: { data: unknown; partition: number }[] | undefined;
    for (let i = 0; i < 4 && !found; i++) {
      const batch = await consumer.poll({ max: 8, timeoutMs: 0 });
      if (batch.some((m) => m.data === "urgent")) found = batch;
      await consumer.ackAll(batch);
    }
    expect(found, "leased within as many polls as partitions").toBeDefined();
    // Its partition gave it before any of its backlog.
    const partition = found!.find((m) => m.data === "urgent")!.partition;
    expect(found!.filter((m) => m.partition === partition)[0]!.data).toBe("urgent");
  } finally {
    await consumer.close();
    await writer.close();
  }
});
