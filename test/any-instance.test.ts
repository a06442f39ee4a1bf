/**
 * An ordinary queue (no partitions: the crate's layout) served by every instance: two
 * `v-queue serve` processes (the built CLI) on one directory, then on one Redis, both producing
 * to one queue and consuming it with one ordered consumer, through the client SDK. The writer
 * and the consumer are handed over between the two on request (after the batch in flight), as
 * one partition's are: no 409 reaches the client (its fetch sees none), and every acknowledged
 * message is consumed exactly once (each batch is committed before the next consume, and a
 * holder lets go only once what it handed out is committed), each producer's in order.
 * Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, type VQueueClient } from "../client";
import { startInstance, sleep, type ServeInstance } from "./helpers/multi-instance";
import { redisTestsRun, startRedisServer, type RedisServer } from "./helpers/redis";

const QUEUE = "plain";
const root = mkdtempSync(join(tmpdir(), "vq-anyinst-"));
const instances: ServeInstance[] = [];
const redises: RedisServer[] = [];

afterAll(async () => {
  for (const instance of instances) instance.kill("SIGKILL");
  for (const redis of redises) await redis.stop();
  rmSync(root, { recursive: true, force: true });
});

/** A client of `url` whose every answer's status is counted in `statuses`. */
function countingClient(url: string, statuses: Map<number, number>): VQueueClient {
  const counting: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    return res;
  };
  return createClient({ baseURL: url, fetch: counting, retryTimeoutMs: 60_000 });
}

interface Traffic {
  /** What each producer had acknowledged, in order. */
  produced: string[][];
  /** What each consumer loop received, in order. */
  consumed: string[][];
  statuses: Map<number, number>;
}

/** One producer per instance (`batches` batches of `size`, one after another), and, with `consume`, one loop per instance consuming `consumer` and committing each batch. */
async function traffic(urls: string[], options: { batches: number; size: number; consume: boolean }): Promise<Traffic> {
  const statuses = new Map<number, number>();
  const clients = urls.map((url) => countingClient(url, statuses));
  const produced = clients.map((): string[] => []);
  const consumed = clients.map((): string[] => []);
  let producing = true;
  const producers = clients.map(async (client, p) => {
    for (let b = 0; b < options.batches; b++) {
      const batch = Array.from({ length: options.size }, (_, i) => `${p}:${b * options.size + i}`);
      await client.produce(QUEUE, batch);
      produced[p]!.push(...batch);
    }
  });
  const total = () => consumed.reduce((sum, list) => sum + list.length, 0);
  const consumers = options.consume
    ? clients.map(async (client, c) => {
        // The queue exists once something was produced (a consume of a queue never written is 404).
        while (produced.flat().length === 0) await sleep(20);
        while (producing || total() < produced.flat().length) {
          const { messages, cursor } = await client.consume(QUEUE, "c", { maxMessages: 20, timeoutMs: 300 });
          for (const message of messages) consumed[c]!.push(message.data as string);
          if (cursor) await client.commit(QUEUE, "c", cursor);
        }
      })
    : [];
  await Promise.all(producers);
  producing = false;
  await Promise.all(consumers);
  return { produced, consumed, statuses };
}

/** Every acknowledged message consumed exactly once, each producer's in order within what each loop received. */
function expectExactlyOnceInOrder({ produced, consumed }: Traffic): void {
  const all = consumed.flat();
  expect(new Set(all).size).toBe(all.length);
  expect([...all].sort()).toEqual(produced.flat().sort());
  for (const list of consumed) {
    for (let p = 0; p < produced.length; p++) {
      const mine = list.filter((m) => m.startsWith(`${p}:`)).map((m) => Number(m.slice(m.indexOf(":") + 1)));
      expect(mine).toEqual([...mine].sort((a, b) => a - b));
    }
  }
}

/** Reads what is left of the queue for consumer `c` through `url`, until an empty answer. */
async function drain(url: string, statuses: Map<number, number>): Promise<string[]> {
  const client = countingClient(url, statuses);
  const out: string[] = [];
  for (;;) {
    const { messages, cursor } = await client.consume(QUEUE, "c", { maxMessages: 500 });
    if (messages.length === 0) return out;
    out.push(...messages.map((m) => m.data as string));
    await client.commit(QUEUE, "c", cursor);
  }
}

describe.each([
  { storage: "one directory", redis: false },
  { storage: "one Redis (leased locks)", redis: true },
])("two instances, one ordinary queue, on $storage", ({ redis }) => {
  if (redis && !redisTestsRun("any instance on Redis")) return;

  async function two(): Promise<ServeInstance[]> {
    let args: string[];
    if (redis) {
      const server = await startRedisServer();
      redises.push(server);
      args = ["--storage", `redis+vq://127.0.0.1:${server.port}/0?lease=2000`];
    } else args = ["--dir", mkdtempSync(join(root, "dir-"))];
    const started = [await startInstance(args), await startInstance(args)];
    instances.push(...started);
    return started;
  }

  it("both produce to it: no 409 reaches the client, every acknowledged message is stored once, each producer's in order", { timeout: 120_000 }, async () => {
    const [a, b] = await two();
    const run = await traffic([a!.url, b!.url], { batches: 60, size: 5, consume: false });
    expect(run.statuses.get(409) ?? 0).toBe(0);
    run.consumed[0] = await drain(a!.url, run.statuses);
    expectExactlyOnceInOrder(run);
    expect(run.produced.flat()).toHaveLength(600);
    a!.kill("SIGKILL");
    b!.kill("SIGKILL");
  });

  it("both produce to it and consume it with one ordered consumer: no 409 reaches the client, every acknowledged message is consumed exactly once, each producer's in order", { timeout: 120_000 }, async () => {
    const [a, b] = await two();
    const run = await traffic([a!.url, b!.url], { batches: 60, size: 5, consume: true });
    expect(run.statuses.get(409) ?? 0).toBe(0);
    expectExactlyOnceInOrder(run);
    expect(run.produced.flat()).toHaveLength(600);
    a!.kill("SIGKILL");
    b!.kill("SIGKILL");
  });
});
