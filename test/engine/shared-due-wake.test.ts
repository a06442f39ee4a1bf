// A message that comes due while a poll's take reads ahead: the poll's wait must not sleep past it.
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { LogFile, QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { sleep } from "../helpers/sleep";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";

/** The memory store `name`, whose log reads and sizes take `slowMs` while `slow.on` (a storage that answers slowly, at the one step the test picks). */
function slowReads(name: string, slowMs: number): { driver: QueueDriver; slow: { on: boolean } } {
  const inner = memoryDriver({ name });
  const slow = { on: false };
  const pause = () => (slow.on ? sleep(slowMs) : Promise.resolve());
  const wrap = (log: LogFile): LogFile => ({
    ...log,
    size: async () => (await pause(), log.size()),
    read: async (at, length) => (await pause(), log.read(at, length)),
    append: (at, data, fence) => log.append(at, data, fence),
    truncate: (length, fence) => log.truncate(length, fence),
    sync: () => log.sync(),
    close: () => log.close(),
  });
  const driver: QueueDriver = {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      return log && wrap(log);
    },
  };
  return { driver, slow };
}

describe("a shared consumer's poll", () => {
  it("hands out a nacked message that came due while its take was reading ahead, without waiting out the long poll", async () => {
    const { driver, slow } = slowReads("due-wake", 400);
    const writer = await QueueWriter.open("q", { driver });
    await writer.pushBatch(["a"]);
    // No writer here while polling: the consumer reads the storage to learn of new messages.
    await writer.close();
    const consumer = await SharedConsumer.open("q", "w", { driver });
    try {
      const [a] = await consumer.poll({ max: 1, leaseMs: 60_000 });
      expect(a?.data).toBe("a");
      // Due in 100 ms: while the next take reads ahead (400 ms), it comes due.
      await consumer.nack(a!, { delayMs: 100 });
      slow.on = true;
      const started = performance.now();
      const again = await consumer.poll({ max: 1, timeoutMs: WAKE_TIMEOUT_MS });
      expect(again.map((m) => [m.data, m.deliveries])).toEqual([["a", 2]]);
      expectEndedEarly(started);
    } finally {
      slow.on = false;
      await consumer.close();
    }
  }, 60_000);
});
