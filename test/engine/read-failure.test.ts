// A read that fails after it has taken messages (the storage went down while the reader looked
// for more, as in a Redis failover): the messages taken are handed out, not skipped. The
// consumers of the chaos test on a Redis Cluster lost messages so before (never handed out,
// their position passed).
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { browseMessages } from "../../src/inspect/browse";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueDriver } from "../../src/core/driver";
import { VQueueError } from "../../src/core/errors";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";

/**
 * Another handle on the same memory store (another process, as readers see it: no shared
 * wake-ups), whose reads of push info lines fail while `failAfter` reads are used up.
 */
function flakyReader(name: string): { driver: QueueDriver; failAfter: (reads: number) => void; heal: () => void } {
  const driver = memoryDriver({ name });
  let left = Infinity;
  return {
    failAfter: (reads) => (left = reads),
    heal: () => (left = Infinity),
    driver: {
      ...driver,
      storageKey: `${driver.storageKey}-reader`,
      async openRecord(path, options) {
        const record = await driver.openRecord(path, options);
        if (!record || !path.endsWith("_info_push")) return record;
        return {
          ...record,
          read: () => (left-- > 0 ? record.read() : Promise.reject(new VQueueError("E_IO", "the storage is down (injected)"))),
        };
      },
    },
  };
}

describe("a read that fails after it took messages", () => {
  for (const kind of ["ordered", "shared"] as const) {
    it(`hands them out (${kind} consumer), and the next read goes on after them`, async () => {
      const name = `read-failure-${kind}-${Math.random()}`;
      const writer = await QueueWriter.open("q", { driver: memoryDriver({ name }), durability: "none" });
      const { driver, failAfter, heal } = flakyReader(name);
      const read = kind === "ordered" ? await QueueConsumer.open("q", "c", { driver }) : await SharedConsumer.open("q", "c", { driver, syncCommits: false });
      const take = async () => (kind === "ordered" ? (read as QueueConsumer).read({ max: 10 }) : (read as SharedConsumer).poll({ max: 10, timeoutMs: 0 }));
      try {
        await writer.pushBatch(["m0", "m1", "m2"]);
        // The first look at the line finds the three; the look for more fails.
        failAfter(1);
        expect((await take()).map((m) => m.data)).toEqual(["m0", "m1", "m2"]);
        heal();
        await writer.pushBatch(["m3"]);
        expect((await take()).map((m) => m.data)).toEqual(["m3"]);
      } finally {
        await read.close();
        await writer.close();
      }
    });
  }

  it("fails a browse page instead (it keeps no position: a short page would read as the end)", async () => {
    const name = `read-failure-browse-${Math.random()}`;
    const writer = await QueueWriter.open("q", { driver: memoryDriver({ name }), durability: "none" });
    const { driver, failAfter, heal } = flakyReader(name);
    try {
      await writer.pushBatch(["m0", "m1", "m2"]);
      failAfter(1);
      await expect(browseMessages(driver, "q", { from: "earliest", limit: 10 })).rejects.toMatchObject({ code: "E_IO" });
      heal();
      expect((await browseMessages(driver, "q", { from: "earliest", limit: 10 })).messages.map((m) => m.data)).toEqual(["m0", "m1", "m2"]);
    } finally {
      await writer.close();
    }
  });
});
