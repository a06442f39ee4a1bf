import { Cluster } from "ioredis";
import { createStorage } from "unstorage";
import redisStorageDriver from "unstorage/drivers/redis";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { resolveStorageDriver } from "../../adapters/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { redisTestsRun } from "../helpers/redis";
import { expectWakeUp } from "../helpers/redis-wake";
import { startRedisCluster, type RedisCluster } from "../helpers/redis-cluster";
import { describeEngineOnDriver } from "./engine-suite";
import { sleep } from "../helpers/sleep";

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

  it("wakes a consumer of another driver instance through pub/sub (a PUBLISH reaches a subscriber on any node)", async () => {
    // Three queues whose slots (88, 6408, 14184) lie on the three masters; the subscriber is connected to one node.
    for (const prefix of ["watch-a", "watch-b", "watch-c"]) await expectWakeUp(driverOn(prefix), driverOn(prefix));
  });

  describe("choosing the driver", () => {
    it("refuses unstorage's redis driver in cluster mode, naming v-queue/drivers/redis and why", () => {
      const storage = createStorage({ driver: redisStorageDriver({ cluster: cluster.startupNodes, lazyConnect: true }) });
      let error: unknown;
      try {
        unstorageDriver({ storage });
      } catch (caught) {
        error = caught;
      }
      expect(error).toMatchObject({ code: "E_OPTION" });
      expect((error as Error).message).toMatch(
        /cannot use unstorage's redis driver in cluster mode: it lists keys with a SCAN of one node.*Use v-queue\/drivers\/redis/,
      );
      // Standalone stays allowed.
      expect(unstorageDriver({ storage: createStorage({ driver: redisStorageDriver({ url: "redis://127.0.0.1:1", lazyConnect: true }) }) }).name).toBe(
        "unstorage",
      );
    });

    it("is what resolveStorageDriver gives for redis+vq://host:port?cluster=1", async () => {
      const { port } = cluster.startupNodes[0]!;
      const driver = await resolveStorageDriver(`redis+vq://127.0.0.1:${port}?cluster=1&prefix=spec&lease=5000`);
      expect(driver.name).toBe("redis");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push("via-spec");
      await q.close();
      const c = await QueueConsumer.open("q", "c", { driver });
      expect((await c.read()).map((m) => m.data)).toEqual(["via-spec"]);
      await c.close();
      await driver.dispose?.();
      await expect(resolveStorageDriver(`redis+vq://127.0.0.1:${port}?clutser=1`)).rejects.toThrow(
        /unknown parameter "clutser"; use prefix, cluster, lease, replicas, waitMs/,
      );
    });
  });

  // Last: it kills a master (then brings it back as a replica).
  describe("a master killed while producing", () => {
    /**
     * Pushes `m-<i>` one at a time; the master of the queue's slot is killed after 100 acks. The
     * writer stops on the first failed write and is reopened (retried while the cluster fails
     * over) until 100 more are acked. Returns what was acknowledged and what a consumer reads.
     */
    const produceThroughFailover = async (prefix: string, extra: Partial<Parameters<typeof redisDriver>[0]>) => {
      const driver = driverOn(prefix, { lockLeaseMs: 3000, ...extra });
      const admin = clientOn();
      const slot = await admin.cluster("KEYSLOT", `{${prefix}:fo}`);
      const ranges = (await admin.cluster("SLOTS")) as unknown as [number, number, [string, number]][];
      const victim = ranges.find(([from, to]) => slot >= from && slot <= to)![2][1];
      admin.disconnect();
      const acked: string[] = [];
      let failures = 0;
      let reopened = 0;
      let q = await QueueWriter.open("fo", { driver, durability: "fsync" });
      const started = Date.now();
      let killedAt = 0;
      for (let i = 0; acked.length < 200; i++) {
        if (acked.length === 100 && i === 100) {
          cluster.kill(victim);
          killedAt = Date.now();
        }
        try {
          await q.push(`m-${i}`);
          acked.push(`m-${i}`);
        } catch {
          failures++;
          await q.close().catch(() => {});
          for (;;) {
            if (Date.now() - started > 60_000) throw new Error("the writer did not come back within 60 s of the failover");
            // Once its replica took over, the old master comes back as the new one's replica
            // (until then, with waitReplicas 1, the new master has no replica: every write fails).
            if (killedAt && Date.now() - killedAt > 5000 && !cluster.nodes.find((n) => n.port === victim)!.child) await cluster.restart(victim);
            try {
              q = await QueueWriter.open("fo", { driver, durability: "fsync" });
              reopened++;
              break;
            } catch {
              await sleep(200);
            }
          }
        }
      }
      await q.close();
      const problems: string[] = [];
      const c = await QueueConsumer.open("fo", "check", { driver, onProblem: (p) => problems.push(p.code) });
      const read: string[] = [];
      for (let got = await c.read({ max: 1000 }); got.length > 0; got = await c.read({ max: 1000 })) read.push(...got.map((m) => m.data as string));
      await c.close();
      await cluster.restart(victim);
      await cluster.waitHealthy();
      // Until the old master's data is replaced by its new master's (a full resync), wait for its link.
      await waitForReplicaLink(victim);
      const lost = acked.filter((m) => !read.includes(m));
      return { acked, read, lost, failures, reopened, problems };
    };

    it("with waitReplicas 1: the writer reopens on the new master and no acknowledged message is lost", async () => {
      const r = await produceThroughFailover("fo-wait", { waitReplicas: { replicas: 1, timeoutMs: 1000 } });
      expect(r.failures).toBeGreaterThan(0); // the kill was felt
      expect(r.reopened).toBeGreaterThan(0);
      expect(r.lost).toEqual([]);
      // Each acknowledged message once, in order (an unacknowledged one may be there too).
      const seen = r.read.filter((m) => r.acked.includes(m));
      expect(seen).toEqual(r.acked);
    }, 120_000);

    it("without WAIT: the writer recovers too; what asynchronous replication lost is counted, not hidden", async () => {
      const r = await produceThroughFailover("fo-async", {});
      expect(r.failures).toBeGreaterThan(0);
      expect(r.reopened).toBeGreaterThan(0);
      // A master acknowledges before its replica has the write: the last writes before the kill
      // can be lost with it. Loopback replication is fast, so this is usually 0; it is reported.
      console.info(
        `[redis failover without WAIT] acknowledged ${r.acked.length}, lost ${r.lost.length}${r.lost.length ? ` (${r.lost.join(", ")})` : ""}; problems while reading: ${r.problems.join(", ") || "none"}`,
      );
      expect(r.lost.length).toBeLessThan(100); // only writes just before the kill can go
      const seen = r.read.filter((m) => r.acked.includes(m));
      expect(seen).toEqual(r.acked.filter((m) => !r.lost.includes(m)));
    }, 120_000);
  });
});

/** Waits until the node on `port` is a replica whose link to its master is up. */
async function waitForReplicaLink(port: number): Promise<void> {
  const { default: Redis } = await import("ioredis");
  const node = new Redis({ port, host: "127.0.0.1", lazyConnect: true });
  try {
    const deadline = Date.now() + 30_000;
    while (!(await node.info("replication").catch(() => "")).includes("master_link_status:up")) {
      if (Date.now() > deadline) throw new Error(`node ${port} did not sync with its new master within 30 s`);
      await sleep(100);
    }
  } finally {
    node.disconnect();
  }
}
