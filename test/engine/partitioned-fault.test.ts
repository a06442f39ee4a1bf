// A partitioned consumer whose partitions fail one at a time (a storage outage of one Redis
// master, say): what it took from the others before the failure is answered, not dropped.
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { VQueueError } from "../../src/core/errors";
import type { LogFile, QueueDriver } from "../../src/core/driver";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { partitionName, partitionOfKey } from "../../src/partitions/declaration";

/** The memory driver, with the part reads of `failing` partitions failing (E_IO) while it is set. */
function withFailingReads(driver: QueueDriver, failing: Set<string>): QueueDriver {
  return {
    ...driver,
    storageKey: `${driver.storageKey}-failing`,
    async openLog(path, options) {
      const log = await driver.openLog(path, options);
      if (!log) return log;
      const queue = path.split("/")[0]!.replace(/-\d+$/, "");
      const read: LogFile["read"] = (position, length) =>
        failing.has(queue) ? Promise.reject(new VQueueError("E_IO", `read of ${path} failed (injected)`)) : log.read(position, length);
      return { ...log, read };
    },
  };
}

describe("a partitioned shared consumer when one partition's storage fails", () => {
  it("answers the leases it took from the others, and hands out the failed one's once it reads again", async () => {
    const failing = new Set<string>();
    const driver = withFailingReads(memoryDriver({ name: `fan-fault-${Math.random()}` }), failing);
    const writer = await PartitionedWriter.open("q", { driver, partitions: 2, durability: "none" });
    const keyOf = (p: number) => ["a", "b", "c", "d", "e", "f"].find((k) => partitionOfKey(k, 2) === p)!;
    for (const p of [0, 1]) for (let i = 0; i < 3; i++) await writer.produce([`p${p}-${i}`], { partitionKey: keyOf(p) });
    const consumer = await PartitionedSharedConsumer.open("q", "work", { driver, partitions: 2, syncCommits: false });
    try {
      failing.add(partitionName("q", 1));
      // Each answer starts from another partition: whichever comes first, partition 1 fails and 0's leases are answered.
      const got: string[] = [];
      for (let round = 0; round < 4 && got.length < 3; round++) {
        const leased = await consumer.poll({ max: 10, timeoutMs: 0 }).catch((error: unknown) => {
          // Partition 1 first, nothing taken yet: the failure itself is the answer.
          expect(VQueueError.isError(error) && error.code).toBe("E_IO");
          return [];
        });
        got.push(...leased.map((m) => String(m.data)));
      }
      expect(got.sort()).toEqual(["p0-0", "p0-1", "p0-2"]);
      failing.clear();
      const rest = await consumer.poll({ max: 10, timeoutMs: 1000 });
      expect(rest.map((m) => String(m.data)).sort()).toEqual(["p1-0", "p1-1", "p1-2"]);
    } finally {
      await consumer.close();
      await writer.close();
    }
  });
});
