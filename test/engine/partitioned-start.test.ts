// Where a new consumer of a partitioned queue starts: "latest" skips what each partition held
// when it opened, and no message of a partition first written after that.
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { PartitionedConsumer } from "../../src/consumers/ordered/partitioned";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { declarePartitions, partitionOfKey } from "../../src/partitions/declaration";

let stores = 0;

/** A key for each of `count` partitions. */
const keysFor = (count: number) =>
  Array.from({ length: count }, (_, k) => Array.from({ length: 1000 }, (_, i) => `key-${i}`).find((key) => partitionOfKey(key, count) === k)!);

describe('start: "latest" on a partitioned queue', () => {
  for (const kind of ["ordered", "shared"] as const) {
    it(`${kind}: the backlog is skipped; a partition first written after the open is read from its first message`, async () => {
      const driver = memoryDriver({ name: `partitioned-start-${++stores}` });
      await declarePartitions(driver, "q", 4);
      const keys = keysFor(4);
      const writer = await PartitionedWriter.open("q", { driver });
      await writer.produce(["old-0"], { partitionKey: keys[0]! });
      await writer.produce(["old-1"], { partitionKey: keys[1]! });
      const consumer =
        kind === "ordered"
          ? await PartitionedConsumer.open("q", "c", { driver, start: "latest" })
          : await PartitionedSharedConsumer.open("q", "c", { driver, start: "latest" });
      // Partitions 2 and 3 were never written when it opened; 0 gets one more.
      await writer.produce(["new-2"], { partitionKey: keys[2]! });
      await writer.produce(["new-0"], { partitionKey: keys[0]! });
      await writer.produce(["new-3a", "new-3b"], { partitionKey: keys[3]! });
      await writer.close();
      const got: string[] = [];
      for (let i = 0; i < 50 && got.length < 4; i++) got.push(...(await consumer.poll({ max: 10, timeoutMs: 100 })).map((m) => String(m.data)));
      expect(got.sort()).toEqual(["new-0", "new-2", "new-3a", "new-3b"]);
      await consumer.close();
    });
  }
});
