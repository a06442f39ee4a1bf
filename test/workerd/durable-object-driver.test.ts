/**
 * The engine's behaviour suite on the durable-object driver: the driver runs here (Node), each
 * call goes to a real VQueueObject in workerd over HTTP (./_rpc.ts).
 * So the objects' storage logic (chunks, fenced writes, leases, the registry) meets every engine
 * test the fs, memory and redis drivers pass.
 */
import type { Miniflare } from "../helpers/tool-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import durableObjectDriver, { type DurableObjectNamespace } from "../../adapters/drivers/durable-object";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { describeEngineOnDriver } from "../drivers/engine-suite";
import { startWorker } from "./_miniflare";
import { callObject } from "./_rpc";
import { sleep } from "../helpers/sleep";

let mf: Miniflare;
let namespace: DurableObjectNamespace;
let n = 0;

beforeAll(async () => {
  mf = await startWorker({ http: true });
  const base = String(await mf.ready).replace(/\/$/, "");
  namespace = {
    idFromName: (name) => ({ toString: () => name }),
    get: (id) => {
      const name = id.toString();
      return new Proxy(
        {},
        { get: (_, method) => (typeof method === "string" && method !== "then" ? (...args: unknown[]) => callObject(base, name, method, args) : undefined) },
      );
    },
  };
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

describeEngineOnDriver("durable-object (workerd)", () => {
  const prefix = `engine-${++n}`;
  return { driver: durableObjectDriver({ namespace, prefix }), reopen: () => durableObjectDriver({ namespace, prefix }) };
});

describe("durable-object driver", () => {
  it("refuses a write fenced by a lock another holder took after its lease ran out (E_FENCED), and writes nothing", async () => {
    const prefix = `fence-${++n}`;
    const a = durableObjectDriver({ namespace, prefix, lockLeaseMs: 300 });
    const b = durableObjectDriver({ namespace, prefix, lockLeaseMs: 300 });
    await a.mkdir("q-0");
    const log = (await a.openLog("q-0/q_queue", { create: true }))!;
    const first = (await a.lock("q_queue.lock"))!;
    expect(first.epoch).toBeGreaterThan(0);
    expect(await b.lock("q_queue.lock")).toBeUndefined();
    await first.release();
    const second = (await b.lock("q_queue.lock"))!;
    expect(second.epoch).toBeGreaterThan(first.epoch!);
    await expect(log.append(0, new Uint8Array([1, 2, 3]), first)).rejects.toMatchObject({ code: "E_FENCED" });
    expect(await log.size()).toBe(0);
    await log.append(0, new Uint8Array([1, 2, 3]), second);
    expect(await log.size()).toBe(3);
    // A stale remove (retention deleting a part) is refused too: the part stays.
    await expect(a.remove("q-0", first)).rejects.toMatchObject({ code: "E_FENCED" });
    expect(await b.list("q-0")).toEqual(["q_queue"]);
    await b.remove("q-0", second);
    expect(await b.list("q-0")).toEqual([]);
    await second.release();
  });

  it("costs a few calls to the queue's object per message: counted for docs/runtimes.md", async () => {
    const calls: string[] = [];
    const counting: DurableObjectNamespace = {
      idFromName: (name) => namespace.idFromName(name),
      get: (id) => {
        const stub = namespace.get(id) as Record<string, (...args: unknown[]) => unknown>;
        return new Proxy(stub, {
          get:
            (target, key) =>
            (...args: unknown[]) => (calls.push(String(key)), target[key as string]!(...args)),
        });
      },
    };
    const driver = durableObjectDriver({ namespace: counting, prefix: `cost-${++n}` });
    const writer = await QueueWriter.open("cost", { driver });
    const consumer = await QueueConsumer.open("cost", "c", { driver });
    const opened = calls.splice(0).length;
    const N = 50;
    for (let i = 0; i < N; i++) await writer.push(`message ${i}`);
    const perPush = calls.splice(0);
    const batch = await writer.pushBatch(Array.from({ length: N }, (_, i) => `batched ${i}`));
    expect(batch).toHaveLength(N);
    const perBatch = calls.splice(0);
    let read = 0;
    while (read < 2 * N) {
      const got = await consumer.read({ max: 1 });
      if (got.length === 0) break;
      read += got.length;
      await consumer.commit(got.at(-1)!);
    }
    const perConsume = calls.splice(0);
    const tally = (list: string[]) => Object.entries(list.reduce<Record<string, number>>((t, k) => ((t[k] = (t[k] ?? 0) + 1), t), {}));
    console.info(
      `[durable-object cost] open writer + consumer: ${opened} calls; push one at a time: ${(perPush.length / N).toFixed(1)} calls/message ${JSON.stringify(tally(perPush))}; batch of ${N}: ${perBatch.length} calls; consume + commit one at a time: ${(perConsume.length / (2 * N)).toFixed(1)} calls/message ${JSON.stringify(tally(perConsume))}`,
    );
    expect(read).toBe(2 * N);
    expect(perPush.length / N).toBeLessThanOrEqual(4);
    expect(perBatch.length).toBeLessThanOrEqual(6);
    expect(perConsume.length / (2 * N)).toBeLessThanOrEqual(4);
    await consumer.close();
    await writer.close();
  });

  it("leases: one that ran out is taken back by its holder while nobody took the lock, and lost for good once another did", async () => {
    const object = namespace.get(namespace.idFromName(`lease-${++n}:q`)) as import("../../adapters/drivers/utils/queue-object").VQueueObject;
    const first = await object.lock("q_queue.lock", 100);
    expect(first).toBeGreaterThan(0);
    expect(await object.lock("q_queue.lock", 100)).toBe(0); // held
    await sleep(200);
    // Ran out (workerd runs no timer between requests, so no renewal came), nobody took it: taken back.
    expect(await object.isLocked("q_queue.lock")).toBe(false);
    expect(await object.renew("q_queue.lock", first, 100)).toBe(true);
    expect(await object.lock("q_queue.lock", 100)).toBe(0);
    await sleep(200);
    const second = await object.lock("q_queue.lock", 5000);
    expect(second).toBe(first + 1);
    expect(await object.renew("q_queue.lock", first, 100)).toBe(false);
    await object.mkdir("q-0");
    await object.open("q-0/q_queue", true);
    expect(await object.append("q-0/q_queue", 0, new Uint8Array([1]), { path: "q_queue.lock", epoch: first })).toMatchObject({ ok: false, reason: "fenced" });
    expect(await object.append("q-0/q_queue", 0, new Uint8Array([1]), { path: "q_queue.lock", epoch: second })).toMatchObject({ ok: true });
    expect(await object.append("q-0/q_queue", 0, new Uint8Array([2]), { path: "q_queue.lock", epoch: second })).toMatchObject({
      ok: false,
      reason: "not-at-end",
      size: 1,
    });
  });

  it("keeps a 5 MiB append in 64 KiB values and reads any range of it back", async () => {
    const driver = durableObjectDriver({ namespace, prefix: `big-${++n}` });
    const writer = await QueueWriter.open("big", { driver, durability: "none" });
    const body = new Uint8Array(5 * 1024 * 1024 + 7).map((_, i) => (i * 31) & 0xff);
    await writer.push(body);
    await writer.push("after");
    await writer.close();
    const log = (await driver.openLog("big-0/big_queue", { create: false }))!;
    const size = await log.size();
    expect(size).toBeGreaterThan(body.length);
    const middle = await log.read(3 * 65536 - 5, 70_000);
    expect(middle.length).toBe(70_000);
    const whole = await log.read(0, size);
    expect(Buffer.from(whole).includes(Buffer.from(body.subarray(65530, 65600)))).toBe(true);
  });
});
