/**
 * The engine's behaviour suite on the durable-object driver: the driver runs here (Node), each
 * call goes to a real VQueueObject in workerd through Miniflare's proxy of the namespace binding.
 * So the objects' storage logic (chunks, fenced writes, leases, the registry) meets every engine
 * test the fs, memory and redis drivers pass.
 */
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import durableObjectDriver, { type DurableObjectNamespace } from "../../adapters/drivers/durable-object";
import { QueueWriter } from "../../src/writer";
import { describeEngineOnDriver } from "../drivers/engine-suite";
import { startWorker } from "./_miniflare";

let mf: Miniflare;
let namespace: DurableObjectNamespace;
let n = 0;

beforeAll(async () => {
  mf = await startWorker();
  const real = (await mf.getDurableObjectNamespace("VQUEUE")) as unknown as DurableObjectNamespace;
  // One stub per object name, made once: Miniflare's proxy makes idFromName and get synchronous
  // calls to workerd, which trip over its async calls in flight (an assertion in Miniflare).
  const stubs = new Map<string, unknown>();
  namespace = {
    idFromName: (name) => ({ toString: () => name }),
    get: (id) => {
      const name = id.toString();
      if (!stubs.has(name)) stubs.set(name, real.get(real.idFromName(name)));
      return stubs.get(name);
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
    await second.release();
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
