import { expect } from "vitest";
import type { QueueDriver } from "../../src/driver";
import { QueueConsumer } from "../../src/consumer";
import { QueueWriter } from "../../src/writer";

/**
 * A consumer on `consumerDriver` (another instance, as another process has) that would poll only
 * once a minute gets a push made through `writerDriver` within 2 s: only a storage watch wakes it.
 */
export async function expectWakeUp(writerDriver: QueueDriver, consumerDriver: QueueDriver): Promise<void> {
  const q = await QueueWriter.open("w", { driver: writerDriver, durability: "none" });
  const c = await QueueConsumer.open("w", "c", { driver: consumerDriver, pollIntervalMs: 60_000 });
  try {
    const started = Date.now();
    const got = c.poll({ max: 1, timeoutMs: 5000 });
    await new Promise((r) => setTimeout(r, 100));
    await q.push("ping");
    expect((await got).map((m) => m.data)).toEqual(["ping"]);
    expect(Date.now() - started).toBeLessThan(2000);
  } finally {
    await c.close();
    await q.close();
  }
}
