import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import type { QueueDriver } from "../../src/driver";
import { QueueConsumer } from "../../src/consumer";
import { QueueWriter } from "../../src/writer";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { describeEngineOnDriver } from "./engine-suite";

const available = redisTestsRun("redis driver");

describe.skipIf(!available)("redis driver over a real redis-server", () => {
  let server: RedisServer;
  const drivers: QueueDriver[] = [];
  let n = 0;
  const driverOn = (prefix: string, extra: Partial<Parameters<typeof redisDriver>[0]> = {}) => {
    const driver = redisDriver({ redis: server.url, prefix, ...extra });
    drivers.push(driver);
    return driver;
  };
  const disposeAll = async () => {
    for (const driver of drivers.splice(0)) await driver.dispose?.();
  };
  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    await disposeAll();
    await server?.stop();
  });

  // Each test gets its own prefix on the one server; a reopen is a new connection.
  describeEngineOnDriver(
    "redis",
    () => {
      const prefix = `engine-${++n}`;
      return { driver: driverOn(prefix), reopen: () => driverOn(prefix) };
    },
    disposeAll,
  );

  describe("keys and registry", () => {
    it("keeps a part as one raw string under the queue's hash tag, and lists queues from the registry", async () => {
      const driver = driverOn("raw");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push(new Uint8Array([0, 1, 0xfe, 0xff]));
      await q.close();
      const redis = new Redis(server.url);
      try {
        const part = await redis.getBuffer("{raw:q}:f:q-0/q_queue");
        expect(part!.subarray(25)).toEqual(Buffer.from([0, 1, 0xfe, 0xff]));
        expect(await redis.smembers("{raw}:queues")).toEqual(["q"]);
        expect((await redis.smembers("{raw:q}:files")).sort()).toEqual(["q-0/", "q-0/q_index", "q-0/q_info_push", "q-0/q_queue", "q_info_queue"]);
        // Every key of the queue shares its tag (one slot).
        expect((await redis.keys("*raw*")).every((k) => k.startsWith("{raw:q}") || k === "{raw}:queues")).toBe(true);
      } finally {
        redis.disconnect();
      }
      expect((await driver.list("")).sort()).toEqual(["q-0", "q_info_queue"]);
      expect((await driver.list("q-0")).sort()).toEqual(["q_index", "q_info_push", "q_queue"]);
    });

    it("forgets a removed queue in list, and locks take epochs that grow", async () => {
      const driver = driverOn("gone");
      const a = (await driver.lock("a_queue.lock"))!;
      expect(await driver.lock("a_queue.lock")).toBeUndefined();
      expect(await driver.isLocked!("a_queue.lock")).toBe(true);
      await a.release();
      const b = (await driver.lock("a_queue.lock"))!;
      expect(b.epoch).toBeGreaterThan(a.epoch!);
      await b.release();
      expect(await driver.isLocked!("a_queue.lock")).toBe(false);
      const q = await QueueWriter.open("a", { driver, durability: "none" });
      await q.push("x");
      await q.close();
      expect(await driver.list("")).toContain("a_info_queue");
      await driver.remove("a-0");
      await driver.remove("a_info_queue");
      expect(await driver.list("")).toEqual([]);
      const redis = new Redis(server.url);
      try {
        expect(await redis.smembers("{gone}:queues")).toEqual([]);
      } finally {
        redis.disconnect();
      }
    });

    it("refuses a stale holder's writes (E_FENCED) once its lease ran out and another took the lock", async () => {
      const driver = driverOn("fence", { lockLeaseMs: 300 });
      const old = (await driver.lock("f_queue.lock"))!;
      const log = (await driver.openLog("f-0/f_queue", { create: true }))!;
      await log.append(0, new Uint8Array([1, 2]), old);
      // Simulate a pause: the lease runs out without refresh (the key is dropped as expiry would).
      const redis = new Redis(server.url);
      await redis.del("{fence:f}:l:f_queue.lock");
      redis.disconnect();
      const fresh = (await driver.lock("f_queue.lock"))!;
      expect(fresh.epoch).toBeGreaterThan(old.epoch!);
      await expect(log.append(2, new Uint8Array([3]), old)).rejects.toMatchObject({ code: "E_FENCED" });
      await expect(log.truncate(0, old)).rejects.toMatchObject({ code: "E_FENCED" });
      expect(old.lost!.aborted).toBe(true);
      await log.append(2, new Uint8Array([4]), fresh);
      expect([...(await log.read(0, 10))]).toEqual([1, 2, 4]);
      await fresh.release();
    });

    it("checks its options with clear errors", () => {
      expect(() => redisDriver({} as never)).toThrow(/Missing required option `redis`/);
      expect(() => redisDriver({ redis: "http://x" })).toThrow(/Invalid redis "http:\/\/x": use a redis:\/\//);
      expect(() => redisDriver({ redis: server.url, prefix: "{a}" })).toThrow(/Invalid prefix "\{a\}"/);
      expect(() => redisDriver({ redis: server.url, lockLeaseMs: 5 })).toThrow(/Invalid lockLeaseMs 5: use an integer from 30 up/);
      expect(() => redisDriver({ redis: server.url, waitReplicas: { replicas: -1 } })).toThrow(/Invalid waitReplicas.replicas -1/);
    });

    it("refuses WAIT for more replicas than exist: the push fails, not acknowledged", async () => {
      const driver = driverOn("wait", { waitReplicas: { replicas: 1, timeoutMs: 50 } });
      await expect(QueueWriter.open("w", { driver, durability: "none" })).rejects.toThrow(/reached 0 of the 1 replica\(s\)/);
    });

    it("wakes a consumer of another driver instance through pub/sub", async () => {
      const writerDriver = driverOn("watch");
      const q = await QueueWriter.open("w", { driver: writerDriver, durability: "none" });
      const c = await QueueConsumer.open("w", "c", { driver: driverOn("watch"), pollIntervalMs: 60_000 });
      const started = Date.now();
      const got = c.poll({ max: 1, timeoutMs: 5000 });
      await new Promise((r) => setTimeout(r, 100));
      await q.push("ping");
      expect((await got).map((m) => m.data)).toEqual(["ping"]);
      expect(Date.now() - started).toBeLessThan(2000);
      await c.close();
      await q.close();
    });
  });
});
