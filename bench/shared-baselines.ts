/**
 * The baselines of the shared-consumer bench (issue 13), on one local redis-server (AOF
 * everysec, bench/redis-server.ts): competing workers that each acknowledge every message.
 * - BullMQ: a Queue filled with `addBulk` (not timed), then a Worker with concurrency N and a
 *   no-op processor, jobs `removeOnComplete: true` / `removeOnFail: true` so redis keeps no
 *   finished job; timed from `worker.run()` to the N-th `completed` event.
 *   With `prioritized`, each job gets the priority of the mix (shared-priority.ts) in BullMQ's
 *   convention (1 highest), so every job goes through its prioritized set; with `limiter`, the
 *   Worker has BullMQ's rate limiter (`{ max, duration }`).
 * - Redis Streams: a consumer group of N consumers (one ioredis connection each), each reading
 *   `XREADGROUP COUNT <batch>` and sending one `XACK` command per message, the batch's XACKs
 *   pipelined (one round trip), before its next read.
 */
import type { default as Redis } from "ioredis";
import type { RedisServer } from "./redis-server";
import { bodyOf, bullmqPriorityOf, EarlyShare } from "./shared-priority";

export interface DrainSetup {
  messages: number;
  concurrency: number;
  /** Messages per read (XREADGROUP COUNT). */
  batch: number;
  payload: string;
}

/** One scenario of the interleaved runs: `run` drains `messages` once and returns the seconds it took. */
export interface Drain {
  run(round: number): Promise<number>;
  close(): Promise<void>;
  /** A drain of the priority mix: each run's share of messages of a priority among the first tenth it handed out. */
  early?: number[];
  /** A drain of the group mix: each run's count of messages handed out before an earlier one of their group. */
  outOfOrder?: number[];
}

export interface BullmqFeatures {
  /** Jobs added with the priorities of the mix (shared-priority.ts). */
  prioritized?: boolean;
  /** The Worker's rate limiter. */
  limiter?: { max: number; duration: number };
}

export async function bullmqDrain(server: RedisServer, setup: DrainSetup, { prioritized = false, limiter }: BullmqFeatures = {}): Promise<Drain> {
  const { Queue, Worker } = await import("bullmq");
  const connection = { host: "127.0.0.1", port: server.port };
  const opts = { removeOnComplete: true, removeOnFail: true };
  const job = (i: number) =>
    prioritized ? { name: "m", data: bodyOf(i, setup.payload), opts: { ...opts, priority: bullmqPriorityOf(i) } } : { name: "m", data: setup.payload, opts };
  const drain: Drain = {
    early: prioritized ? [] : undefined,
    async run(round) {
      const name = `bench-${prioritized ? "p" : ""}${limiter ? "l" : ""}${round}`;
      const queue = new Queue(name, { connection });
      for (let sent = 0; sent < setup.messages; sent += 1000) {
        const n = Math.min(1000, setup.messages - sent);
        await queue.addBulk(Array.from({ length: n }, (_, i) => job(sent + i)));
      }
      const early = new EarlyShare(setup.messages);
      const processor = prioritized ? async (job: { data: unknown }) => early.see(job.data) : async () => {};
      const worker = new Worker(name, processor, { connection, concurrency: setup.concurrency, autorun: false, limiter });
      try {
        let done = 0;
        const all = new Promise<void>((resolve, reject) => {
          worker.on("completed", () => ++done === setup.messages && resolve());
          worker.on("failed", (_job, error) => reject(error));
          worker.on("error", reject);
        });
        const start = performance.now();
        void worker.run();
        await all;
        const seconds = (performance.now() - start) / 1000;
        drain.early?.push(early.share);
        return seconds;
      } finally {
        await worker.close();
        await queue.obliterate({ force: true }).catch(() => {});
        await queue.close();
      }
    },
    close: async () => {},
  };
  return drain;
}

export async function streamsDrain(server: RedisServer, setup: DrainSetup): Promise<Drain> {
  const clients = await Promise.all(Array.from({ length: setup.concurrency }, () => server.connect()));
  const stream = "shared-bench";
  for (let sent = 0; sent < setup.messages; sent += 1000) {
    const pipeline = clients[0]!.pipeline();
    for (let i = sent; i < Math.min(setup.messages, sent + 1000); i++) pipeline.xadd(stream, "*", "d", setup.payload);
    await pipeline.exec();
  }
  return {
    async run(round) {
      const group = `g${round}`;
      await clients[0]!.xgroup("CREATE", stream, group, "0");
      const start = performance.now();
      const counts = await Promise.all(clients.map((client, i) => readGroup(client, stream, group, `c${i}`, setup.batch)));
      const seconds = (performance.now() - start) / 1000;
      const total = counts.reduce((a, b) => a + b, 0);
      if (total !== setup.messages) throw new Error(`Redis Streams: read ${total} messages, expected ${setup.messages}`);
      return seconds;
    },
    async close() {
      await clients[0]!.del(stream);
    },
  };
}

/** One consumer of the group: reads until the stream is drained, acknowledging each message by its own XACK. */
async function readGroup(client: Redis, stream: string, group: string, consumer: string, batch: number): Promise<number> {
  let n = 0;
  for (;;) {
    const res = (await client.xreadgroup("GROUP", group, consumer, "COUNT", batch, "STREAMS", stream, ">")) as [string, [string, string[]][]][] | null;
    const entries = res?.[0]?.[1] ?? [];
    if (entries.length === 0) return n;
    const pipeline = client.pipeline();
    for (const [id] of entries) pipeline.xack(stream, group, id);
    const replies = await pipeline.exec();
    for (const [error] of replies ?? []) if (error) throw error;
    n += entries.length;
  }
}
