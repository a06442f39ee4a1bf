/**
 * An ack of leases from several partitions when one partition's shared consumer cannot take it:
 * - its lock was lost (a pause past the lease: another instance took it over; on a real Redis,
 *   whose fence refuses the write): those acks go to the partition's new holder through its inbox,
 *   and are answered with its verdict, `E_PENDING` while it decides nothing (here: a holder that
 *   never answers), and applied by the next holder. Answered as errors, they were never written
 *   anywhere, and a holder that kept the lost partition answered every later ack and commit of it 409 `E_LOCKED`;
 * - its storage fails (`E_IO`): the other partitions' acks are written, and the answer says so
 *   (200, the failed ones as error items with their code). Answered as a whole failure, a client
 *   takes the written acks for not done and waits for those messages to come again, which they
 *   never do.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import { createQueueHandler } from "../../runtime/index";
import type { QueueDriver } from "../../src/core/driver";
import { consumerLockPath } from "../../src/storage/paths";
import { partitionName, partitionOfKey } from "../../src/partitions/declaration";
import { faulty } from "../helpers/faulty-driver";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";

/** A server on `driver` with a 2-partition queue: three messages leased in p0, two in p1. */
async function leasedOverTwoPartitions(driver: QueueDriver) {
  const handler = createQueueHandler({ driver, queues: { q: { partitions: 2 } }, durability: "none" });
  const call = (path: string, init: RequestInit = {}) =>
    handler.app.fetch(new Request(`http://x/api/v1/queues/q${path}`, { headers: { "content-type": "application/json" }, ...init }));
  const keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
  const inP = (p: number) => keys.filter((k) => partitionOfKey(k, 2) === p);
  for (const [p, n] of [
    [0, 3],
    [1, 2],
  ] as const) {
    for (let i = 0; i < n; i++)
      expect(
        (
          await call("/messages", {
            method: "POST",
            body: JSON.stringify({ message: `p${p}-${i}` }),
            headers: { "content-type": "application/json", "partition-key": inP(p)[0]! },
          })
        ).status,
      ).toBe(201);
  }
  const leased = (await (await call("/consumers/work/lease", { method: "POST", body: JSON.stringify({ max: 10 }) })).json()) as {
    messages: { data: string; lease: string; partition: number }[];
  };
  expect(leased.messages.map((m) => m.partition).sort()).toEqual([0, 0, 0, 1, 1]);
  const ackAll = async () => {
    const res = await call("/consumers/work/ack", { method: "POST", body: JSON.stringify({ leases: leased.messages.map((m) => m.lease) }) });
    expect(res.status).toBe(200);
    return (await res.json()) as { acked: number; errors: { lease: string; code: string }[] };
  };
  /** The lag of consumer `work` in partition `p`, as the storage says. */
  const lagOf = async (p: number) => {
    const res = await handler.app.fetch(new Request(`http://x/api/v1/queues/${partitionName("q", p)}/consumers`));
    return ((await res.json()) as { consumers: { name: string; lag: number }[] }).consumers.find((c) => c.name === "work")?.lag;
  };
  return { handler, call, leased, ackAll, lagOf };
}

describe.skipIf(!redisTestsRun("acks and commits over several partitions"))(
  "acks and commits over several partitions, one partition's lock lost meanwhile",
  () => {
    let server: RedisServer;
    beforeAll(async () => {
      server = await startRedisServer();
    });
    afterAll(() => server?.stop());

    it("sends that partition's acks to its new holder, which applies them: nothing comes again", async () => {
      const driver = redisDriver({ redis: server.url, prefix: "pack", lockLeaseMs: 30_000 });
      const { handler, call, ackAll, lagOf } = await leasedOverTwoPartitions(driver);
      try {
        // Partition 1's shared consumer loses its lock (its lease ran out while the server was paused, and another took it).
        const redis = new Redis(server.url);
        const lock = `{pack:${partitionName("q", 1)}}:l:${consumerLockPath(partitionName("q", 1), "work")}`;
        expect(await redis.set(lock, "another-holder 999")).toBe("OK");

        const answer = await ackAll();
        // Partition 0's are written; partition 1's wait in its inbox for its holder, who has not decided them.
        expect(answer).toMatchObject({ acked: 3, errors: [{ code: "E_PENDING" }, { code: "E_PENDING" }] });
        expect(await lagOf(0)).toBe(0);
        expect(await lagOf(1)).toBe(2);

        // That holder goes away; the next one (this server again) applies the inbox before it hands anything out.
        await redis.del(lock);
        redis.disconnect();
        const again = (await (await call("/consumers/work/lease", { method: "POST", body: JSON.stringify({ max: 10, timeoutMs: 1500 }) })).json()) as {
          messages: unknown[];
        };
        expect(again.messages).toEqual([]);
        expect(await lagOf(1)).toBe(0);
      } finally {
        await handler.close();
        await driver.dispose?.();
      }
    });

    it("sends that partition's commit to its new holder, which applies it: nothing comes again", async () => {
      const driver = redisDriver({ redis: server.url, prefix: "pcommit", lockLeaseMs: 30_000 });
      const { handler, call, lagOf } = await leasedOverTwoPartitions(driver);
      const lagOfOrd = async (p: number) => {
        const res = await handler.app.fetch(new Request(`http://x/api/v1/queues/${partitionName("q", p)}/consumers`));
        return ((await res.json()) as { consumers: { name: string; lag: number }[] }).consumers.find((c) => c.name === "ord")?.lag;
      };
      try {
        expect(await lagOf(1)).toBe(2);
        const consumed = (await (await call("/consumers/ord/messages?max_messages=10&timeout_ms=0")).json()) as {
          cursor: string;
          messages: { partition: number }[];
        };
        expect(consumed.messages.map((m) => m.partition).sort()).toEqual([0, 0, 0, 1, 1]);

        // Partition 1's ordered consumer loses its lock (a pause past its lease; another took it).
        const redis = new Redis(server.url);
        const lock = `{pcommit:${partitionName("q", 1)}}:l:${consumerLockPath(partitionName("q", 1), "ord")}`;
        expect(await redis.set(lock, "another-holder 999")).toBe("OK");
        // Stored, pending while that holder decides nothing (it was answered 409 E_LOCKED, and every later commit of that partition on this server too).
        const committed = await call("/consumers/ord/commit", { method: "POST", body: JSON.stringify({ cursor: consumed.cursor }) });
        expect(committed.status).toBe(503);
        expect(committed.headers.get("retry-after")).toBe("1");
        expect(((await committed.json()) as { error: { code: string } }).error.code).toBe("E_PENDING");
        expect(await lagOfOrd(0)).toBe(0);
        expect(await lagOfOrd(1)).toBe(2);

        // That holder goes away; the next one (this server again) applies the inbox before it hands anything out.
        await redis.del(lock);
        redis.disconnect();
        const again = (await (await call("/consumers/ord/messages?max_messages=10&timeout_ms=1500")).json()) as { messages: unknown[] };
        expect(again.messages).toEqual([]);
        expect(await lagOfOrd(1)).toBe(0);
      } finally {
        await handler.close();
        await driver.dispose?.();
      }
    });
  },
);

describe("an ack over several partitions, one partition's storage failing", () => {
  it("answers the acks that were written, and each failed one as an error item with its code", async () => {
    let failing = false;
    // Only partition 1's shared-consumer journal fails, from the ack on.
    const driver = faulty(
      "partitioned-ack",
      (step, path) => failing && step === "append" && path.startsWith(partitionName("q", 1)) && path.includes("_info_sh"),
      false,
      false,
    );
    const { handler, leased, ackAll, lagOf } = await leasedOverTwoPartitions(driver);
    try {
      failing = true;
      const answer = await ackAll();
      expect(answer.acked).toBe(3);
      const p1 = leased.messages.filter((m) => m.partition === 1).map((m) => m.lease);
      expect(answer.errors.map((e) => e.lease).sort()).toEqual(p1.sort());
      expect(new Set(answer.errors.map((e) => e.code))).toEqual(new Set(["E_IO"]));
      // What the answer says is what the storage holds: partition 0 is consumed, partition 1 is not.
      failing = false;
      expect(await lagOf(0)).toBe(0);
      expect(await lagOf(1)).toBe(2);
    } finally {
      await handler.close();
    }
  });
});
