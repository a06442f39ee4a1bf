import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import type { QueueDriver } from "../../src/driver";
import { QueueConsumer } from "../../src/consumer";
import { QueueWriter } from "../../src/writer";
import { redisTestsRun } from "../helpers/redis";
import { startRedisCluster, type RedisCluster } from "../helpers/redis-cluster";
import { describeEngineOnDriver } from "./engine-suite";

const available = redisTestsRun("redis driver on a Redis Cluster");

describe.skipIf(!available)("redis driver on a real 6-node Redis Cluster", () => {
  let cluster: RedisCluster;
  const drivers: QueueDriver[] = [];
  let n = 0;
  const clientOn = () => new Cluster(cluster.startupNodes, { clusterRetryStrategy: (times) => Math.min(100 * times, 1000) });
  const driverOn = (prefix: string, extra: Partial<Parameters<typeof redisDriver>[0]> = {}) => {
    const driver = redisDriver({ redis: clientOn(), prefix, disposeClient: true, ...extra });
    drivers.push(driver);
    return driver;
  };
  const disposeAll = async () => {
    for (const driver of drivers.splice(0)) await driver.dispose?.();
  };
  beforeAll(async () => {
    cluster = await startRedisCluster();
  }, 60_000);
  afterAll(async () => {
    await disposeAll();
    await cluster?.stop();
  });

  // Queues of one test spread over the three masters (each queue's hash tag picks its slot).
  describeEngineOnDriver(
    "redis (cluster)",
    () => {
      const prefix = `engine-${++n}`;
      return { driver: driverOn(prefix), reopen: () => driverOn(prefix) };
    },
    disposeAll,
  );

  describe("WAIT for replicas", () => {
    it("acknowledges writes that one replica has (waitReplicas 1)", async () => {
      const driver = driverOn("wait1", { waitReplicas: { replicas: 1, timeoutMs: 2000 } });
      const q = await QueueWriter.open("w", { driver, durability: "none" });
      await q.pushBatch(["a", "b"]);
      await q.push("c");
      await q.close();
      const c = await QueueConsumer.open("w", "c", { driver });
      expect((await c.read({ max: 10 })).map((m) => m.data)).toEqual(["a", "b", "c"]);
      await c.close();
    });

    it("fails a write when fewer replicas than asked have it (waitReplicas 2, one replica each)", async () => {
      const driver = driverOn("wait2", { waitReplicas: { replicas: 2, timeoutMs: 100 } });
      await expect(QueueWriter.open("w", { driver, durability: "none" })).rejects.toThrow(/reached 1 of the 2 replica\(s\) asked for \(option waitReplicas\)/);
    });
  });
});
