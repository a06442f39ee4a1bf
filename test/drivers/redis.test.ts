import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import { resolveStorageDriver } from "../../adapters/storage";
import type { QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { SIGNALS_END_CHILD } from "../helpers/runtime";
import { expectStaleConsumerFenced, expectStaleWriterFenced } from "../helpers/fence-checks";
import { expectWakeUp } from "../helpers/redis-wake";
import { describeEngineOnDriver } from "./engine-suite";

const LEASE_MS = 600;

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
      await expect(log.append(2, new Uint8Array([3]), old)).rejects.toMatchObject({
        code: "E_FENCED",
        message: expect.stringContaining(`its lock was taken over by another holder (epoch ${fresh.epoch})`),
      });
      await expect(log.truncate(0, old)).rejects.toMatchObject({ code: "E_FENCED" });
      // A remove too (retention deleting a part, a journal after compaction): the file stays.
      await expect(driver.remove("f-0", old)).rejects.toMatchObject({ code: "E_FENCED", message: expect.stringMatching(/refused to remove "f-0"/) });
      expect(await driver.list("f-0")).toEqual(["f_queue"]);
      expect(old.lost!.aborted).toBe(true);
      await log.append(2, new Uint8Array([4]), fresh);
      expect([...(await log.read(0, 10))]).toEqual([1, 2, 4]);
      // The holder's own remove goes through.
      const other = (await driver.openLog("f-1/f_queue", { create: true }))!;
      await other.append(0, new Uint8Array([9]), fresh);
      await driver.remove("f-1", fresh);
      expect(await driver.list("f-1")).toEqual([]);
      await fresh.release();
    });

    it("loses a lock whose key expired while its holder was paused as expired (nobody took it), and gives it again as a new epoch", async () => {
      const driver = driverOn("paused", { lockLeaseMs: 300 });
      const old = (await driver.lock("p_queue.lock"))!;
      const log = (await driver.openLog("p-0/p_queue", { create: true }))!;
      // A real pause of this process (its event loop blocked, as SIGSTOP or a long GC would): the key expires meanwhile.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
      // A write that was past its check before the pause: refused, and told why.
      await expect(log.append(0, new Uint8Array([1]), old)).rejects.toMatchObject({
        code: "E_FENCED",
        message: expect.stringMatching(/of a stale holder \(epoch \d+\): its lock expired \(nobody holds it now\)/),
      });
      await expect(old.assertHeld!()).rejects.toMatchObject({ code: "E_LOCKED" });
      const { message } = old.lost!.reason as Error;
      expect(message).toMatch(
        /Lost the lock "\{paused:p\}:l:p_queue\.lock": it expired, not renewed for \d+ ms \(this process was paused or cut off past its lease of 300 ms\), and nobody took it since/,
      );
      expect(Number(/not renewed for (\d+) ms/.exec(message)![1])).toBeGreaterThanOrEqual(1000);
      expect(message).not.toMatch(/another holder/);
      const again = (await driver.lock("p_queue.lock"))!;
      expect(again.epoch).toBeGreaterThan(old.epoch!);
      await old.release();
      await again.release();
    });

    it("a shared consumer open twice in one process whose lock expired in a pause is not handed out again: the next open takes the lock anew", async () => {
      const driver = driverOn("shared-paused", { lockLeaseMs: 300 });
      const q = await QueueWriter.open("sp", { driver, durability: "none" });
      await q.pushBatch(["a", "b"]);
      await q.close();
      const quiet = { driver, onProblem: () => {} };
      const first = await SharedConsumer.open("sp", "w", quiet);
      const second = await SharedConsumer.open("sp", "w", quiet);
      expect(second).toBe(first);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
      // The lost lock is found (the renewal after the pause), and the consumer refuses from then on.
      expect(await first.holds()).toBe(false);
      const fresh = await SharedConsumer.open("sp", "w", quiet);
      expect(fresh).not.toBe(first);
      expect((await fresh.poll({ max: 10, timeoutMs: 2000 })).map((m) => m.data)).toEqual(["a", "b"]);
      // The lost one's holders close it: the fresh one stays the one handed out.
      await first.close();
      await second.close();
      const third = await SharedConsumer.open("sp", "w", quiet);
      expect(third).toBe(fresh);
      await third.close();
      await fresh.close();
    });

    it("loses a lock another holder took as taken over, naming the holder's epoch", async () => {
      const driver = driverOn("taken", { lockLeaseMs: 300 });
      const old = (await driver.lock("t_queue.lock"))!;
      const redis = new Redis(server.url);
      await redis.set("{taken:t}:l:t_queue.lock", "someone-else 42", "PX", 5000);
      redis.disconnect();
      // The next renewal (every third of the lease) finds it.
      await new Promise<void>((resolve) => old.lost!.addEventListener("abort", () => resolve(), { once: true }));
      expect((old.lost!.reason as Error).message).toMatch(/it was taken over by another holder \(epoch 42\), not renewed for \d+ ms/);
      await old.release();
    });

    it("is what resolveStorageDriver gives for redis+vq://, under the prefix it names", async () => {
      const driver = await resolveStorageDriver(`redis+vq://127.0.0.1:${server.port}/0?prefix=spec`);
      expect(driver.name).toBe("redis");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push("via-spec");
      await q.close();
      await driver.dispose?.();
      const redis = new Redis(server.url);
      try {
        expect(await redis.smembers("{spec}:queues")).toEqual(["q"]);
      } finally {
        redis.disconnect();
      }
      await expect(resolveStorageDriver(`redis+vq://127.0.0.1:${server.port}?cluster=yes`)).rejects.toThrow(/cluster=yes; use cluster=1/);
    });

    it("has one storageKey per Redis and prefix, and disconnects only a client it made (unless told to)", async () => {
      const client = new Redis(server.url);
      try {
        const passed = redisDriver({ redis: client, prefix: "k" });
        expect(passed.storageKey).toBe(driverOn("k").storageKey);
        expect(passed.storageKey).not.toBe(driverOn("k2").storageKey);
        await passed.isLocked!("a_queue.lock");
        await passed.dispose!();
        expect(await client.ping()).toBe("PONG"); // still connected: not the driver's to close
        const owned = redisDriver({ redis: client, prefix: "k", disposeClient: true });
        const ended = new Promise((r) => client.once("end", r));
        await owned.dispose!();
        await ended;
      } finally {
        client.disconnect();
      }
    });

    it("checks its options with clear errors", () => {
      expect(() => redisDriver({} as never)).toThrow(/Missing required option `redis`/);
      expect(() => redisDriver({ redis: "http://x" })).toThrow(/Invalid redis "http:\/\/x": use a redis:\/\//);
      expect(() => redisDriver({ redis: server.url, prefix: "{a}" })).toThrow(/Invalid prefix "\{a\}"/);
      expect(() => redisDriver({ redis: server.url, lockLeaseMs: 5 })).toThrow(/Invalid lockLeaseMs 5: use an integer from 30 up/);
      expect(() => redisDriver({ redis: server.url, waitReplicas: { replicas: -1 } })).toThrow(/Invalid waitReplicas.replicas -1/);
      const prefixed = new Redis(server.url, { keyPrefix: "app:", lazyConnect: true });
      expect(() => redisDriver({ redis: prefixed })).toThrow(/keyPrefix "app:".*Use the driver's prefix option instead/);
      prefixed.disconnect();
    });

    it("refuses WAIT for more replicas than exist: the push fails, not acknowledged", async () => {
      const driver = driverOn("wait", { waitReplicas: { replicas: 1, timeoutMs: 50 } });
      await expect(QueueWriter.open("w", { driver, durability: "none" })).rejects.toThrow(/reached 0 of the 1 replica\(s\)/);
    });

    it("wakes a consumer of another driver instance through pub/sub", async () => {
      await expectWakeUp(driverOn("watch"), driverOn("watch"));
    });
  });

  describe("fencing across processes (a holder paused past its lease: SIGSTOP, SIGCONT)", () => {
    it.skipIf(SIGNALS_END_CHILD)(
      "a stale writer's pushes fail with E_FENCED and write nothing after the new writer's first record",
      async () => {
        await expectStaleWriterFenced([server.url, "fence-w", String(LEASE_MS)], driverOn("fence-w", { lockLeaseMs: LEASE_MS }), LEASE_MS);
      },
      30_000,
    );

    it.skipIf(SIGNALS_END_CHILD)(
      "a stale consumer cannot overwrite the new holder's saved position",
      async () => {
        await expectStaleConsumerFenced([server.url, "fence-c", String(LEASE_MS)], driverOn("fence-c", { lockLeaseMs: LEASE_MS }), LEASE_MS);
      },
      30_000,
    );
  });
});
