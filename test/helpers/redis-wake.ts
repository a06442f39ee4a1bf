import { expect } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "./timing";
import { sleep } from "./sleep";

/**
 * A consumer on `consumerDriver` (another instance, as another process has) that would poll only
 * once a minute gets a push made through `writerDriver` long before its poll's timeout: only a storage watch wakes it.
 */
export async function expectWakeUp(writerDriver: QueueDriver, consumerDriver: QueueDriver): Promise<void> {
  const q = await QueueWriter.open("w", { driver: writerDriver, durability: "none" });
  const c = await QueueConsumer.open("w", "c", { driver: consumerDriver, pollIntervalMs: 60_000 });
  try {
    const started = performance.now();
    const got = c.poll({ max: 1, timeoutMs: WAKE_TIMEOUT_MS });
    await sleep(100);
    await q.push("ping");
    expect((await got).map((m) => m.data)).toEqual(["ping"]);
    expectEndedEarly(started);
  } finally {
    await c.close();
    await q.close();
  }
}
