import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer, QueueWriter, SharedConsumer, inspectQueue, storageOverview } from "../../src/index";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-overview-");

const drivers: [string, () => QueueDriver][] = [
  ["memory", () => memoryDriver({})],
  [
    "fs",
    () => {
      return fsDriver({ dir: tempDir() });
    },
  ],
];

describe.each(drivers)("storageOverview on %s", (_name, make) => {
  it("tells every queue, its parts and consumers from one listing, as inspectQueue tells each", async () => {
    const driver = make();
    // Names that share prefixes: "a" and "a-1" (whose parts are "a-1-<id>"), and a queue "b_x".
    for (const [queue, count] of [
      ["a", 5],
      ["a-1", 3],
      ["b_x", 1],
    ] as const) {
      const writer = await QueueWriter.open(queue, { driver, durability: "none", maxPartBytes: 1024 });
      await writer.pushBatch(Array.from({ length: count }, (_, i) => `${queue} message ${i} ${"x".repeat(400)}`));
      await writer.close();
    }
    const reader = await QueueConsumer.open("a", "reader", { driver, syncCommits: false });
    await reader.commit((await reader.poll({ max: 2 })).at(-1)!);
    await reader.close();
    const shared = await SharedConsumer.open("a-1", "workers", { driver, syncCommits: false });
    const leased = await shared.poll({ max: 1 });
    await shared.ack(leased[0]!);
    await shared.close();

    const overview = await storageOverview(driver);
    expect(overview.map((q) => q.name)).toEqual(["a", "a-1", "b_x"]);
    for (const queue of overview) {
      const stats = (await inspectQueue(driver, queue.name))!;
      expect(queue.totals.messages).toBe(stats.messages);
      expect(queue.totals.bytes).toBe(stats.bytes);
      expect(queue.totals.partCount).toBe(stats.parts.length);
      expect(queue.consumers.map((c) => [c.name, c.kind, c.part, c.position, c.count])).toEqual(
        stats.consumers.map((c) => [c.name, c.kind, c.part, c.position, c.count]),
      );
    }
    const a = overview[0]!;
    expect(a.totals.partCount).toBeGreaterThan(1); // 1 KiB parts of 400-byte messages: several
    expect(a.consumers[0]).toMatchObject({ name: "reader", kind: "ordered", lag: 3 });
    // The lag in bytes is the bytes of the three records after the position.
    const parts = a.totals.parts();
    const after = parts.filter((p) => p.id > a.consumers[0]!.part).reduce((sum, p) => sum + p.bytes, 0);
    const own = parts.find((p) => p.id === a.consumers[0]!.part)!;
    expect(a.consumers[0]!.lagBytes).toBe(after + own.bytes - a.consumers[0]!.position);
    expect(overview[1]!.consumers[0]).toMatchObject({ name: "workers", kind: "shared" });
    expect((await storageOverview(driver, { include: (q) => q.startsWith("a") })).map((q) => q.name)).toEqual(["a", "a-1"]);
  });
});
