/**
 * An ack of leases from several partitions, one of which fails (its shared consumer's lock was
 * taken over: the storage fences the ack's write), on a real Redis: the other partitions' acks
 * are written, and the answer must say so (200, the failed ones as error items with their
 * code). Answered as a whole failure, a client takes the written acks for not done and waits
 * for those messages to come again, which they never do.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import { createQueueHandler } from "../../runtime/index";
import { consumerLockPath } from "../../src/paths";
import { partitionName, partitionOfKey } from "../../src/partitions";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";

describe.skipIf(!redisTestsRun("acks over several partitions"))("an ack over several partitions, one failing", () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(() => server?.stop());

  it("answers the acks that were written, and each failed one as an error item with its code", async () => {
    const driver = redisDriver({ redis: server.url, prefix: "pack", lockLeaseMs: 30_000 });
    const handler = createQueueHandler({ driver, queues: { q: { partitions: 2 } }, durability: "none" });
    const call = (path: string, init: RequestInit = {}) => handler.app.fetch(new Request(`http://x/api/v1/queues/q${path}`, { headers: { "content-type": "application/json" }, ...init }));
    try {
      // Keys for each partition: three messages in p0, two in p1.
      const keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
      const inP = (p: number) => keys.filter((k) => partitionOfKey(k, 2) === p);
      for (const [p, n] of [[0, 3], [1, 2]] as const) {
        for (let i = 0; i < n; i++) expect((await call("/messages", { method: "POST", body: JSON.stringify({ message: `p${p}-${i}` }), headers: { "content-type": "application/json", "partition-key": inP(p)[0]! } })).status).toBe(201);
      }
      const leased = (await (await call("/consumers/work/lease", { method: "POST", body: JSON.stringify({ max: 10 }) })).json()) as { messages: { data: string; lease: string; partition: number }[] };
      expect(leased.messages.map((m) => m.partition).sort()).toEqual([0, 0, 0, 1, 1]);

      // Partition 1's shared consumer loses its lock (its lease ran out while the server was paused, and another took it).
      const redis = new Redis(server.url);
      const lock = `{pack:${partitionName("q", 1)}}:l:${consumerLockPath(partitionName("q", 1), "work")}`;
      expect(await redis.set(lock, "another-holder 999")).toBe("OK");
      redis.disconnect();

      const res = await call("/consumers/work/ack", { method: "POST", body: JSON.stringify({ leases: leased.messages.map((m) => m.lease) }) });
      expect(res.status).toBe(200);
      const answer = (await res.json()) as { acked: number; errors: { lease: string; code: string }[] };
      expect(answer.acked).toBe(3);
      const p1 = leased.messages.filter((m) => m.partition === 1).map((m) => m.lease);
      expect(answer.errors.map((e) => e.lease).sort()).toEqual(p1.sort());
      expect(new Set(answer.errors.map((e) => e.code))).toEqual(new Set(["E_FENCED"]));

      // What the answer says is what the storage holds: partition 0 is consumed, partition 1 is not.
      const lagOf = async (p: number) => {
        const res = await handler.app.fetch(new Request(`http://x/api/v1/queues/${partitionName("q", p)}/consumers`));
        return ((await res.json()) as { consumers: { name: string; lag: number }[] }).consumers.find((c) => c.name === "work")?.lag;
      };
      expect(await lagOf(0)).toBe(0);
      expect(await lagOf(1)).toBe(2);
    } finally {
      await handler.close();
      await driver.dispose?.();
    }
  });
});
