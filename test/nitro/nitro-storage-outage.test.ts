/**
 * The Nitro module's instance when its storage is down as the app starts (Redis restarting or
 * failing over): the first requests fail, and once Redis answers the queues open and work.
 * Before, the failed open was kept: every request of the app's life failed.
 */
import { afterAll, describe, expect, it } from "vitest";
import { setupVQueue, type VQueueInstance } from "../../adapters/nitro";
import { freePort } from "../helpers/net";
import { launchRedis, redisTestsRun, terminate } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-nitro-outage-");

describe.skipIf(!redisTestsRun("the Nitro module through a storage outage"))("the Nitro module through a storage outage at start", () => {
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const stop of stops) await stop();
  });

  it("opens its queues at a later request once Redis answers", { timeout: 90_000 }, async () => {
    const port = await freePort();
    const vq: VQueueInstance = setupVQueue("outage", { storage: `redis+vq://127.0.0.1:${port}/0`, durability: "none", queues: { events: { partitions: 2 } } });
    stops.push(() => vq.close());
    // Redis is not there: ioredis gives up on the declaration's reads after its retries (about 10 s).
    await expect(vq.handler).rejects.toMatchObject({ code: "E_IO" });
    const produce = () => vq.fetch("/api/v1/queues/events/messages", { method: "POST", body: "hello", headers: { "partition-key": "k" } });

    const redis = await launchRedis(port, await tempDir());
    stops.push(() => terminate(redis));
    const res = await produce();
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ queue: "events", count: 1 });
    expect(await (await vq.fetch("/api/v1/queues/events")).json()).toMatchObject({ partitions: 2, messages: 1 });
  });
});
