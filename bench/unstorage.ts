/**
 * The unstorage benchmark of issue 5: push and consume throughput of v-queue on the unstorage
 * driver over Redis (unstorage 1.x redis driver, ioredis), and on v-queue's own redis driver
 * (issue 15), beside Redis Streams through
 * ioredis (XADD pipelined per batch; XREADGROUP COUNT 1000 + XACK) against the same
 * redis-server, started for the run on a free loopback port. Same messages, same batches.
 *
 * VQ_BENCH_SCALE and VQ_BENCH_REPEATS work as in the engine bench.
 */
import Redis from "ioredis";
import { createStorage, type Storage } from "unstorage";
import redisStorageDriver from "unstorage/drivers/redis";
// The built engine, as the engine bench uses it; the driver comes from the sources.
import { QueueConsumer, QueueWriter } from "v-queue";
import type { QueueDriver } from "../src/core/driver";
import redisDriver from "../adapters/drivers/redis";
import unstorageDriver from "../adapters/drivers/unstorage";
import { hasRedisServer, startRedisServer, type RedisServer } from "../test/helpers/redis";
import { formatRate, formatTable, now, progress, repeat, type Rate, type Sample } from "./util";

const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const COUNT = Math.round(100_000 * SCALE);
const SIZE = 100;
const BATCH = 1000;
const TARGET = 1;
const quiet = () => {};

export async function runUnstorageBench(): Promise<void> {
  console.log(`\n## unstorage and redis drivers over Redis vs Redis Streams, median of ${REPEATS} runs${SCALE < 1 ? `, scale ${SCALE}` : ""}\n`);
  if (!hasRedisServer()) {
    console.log("skipped: redis-server is not on PATH (Debian: apt-get install -y redis-server)");
    return;
  }
  const server = await startRedisServer();
  const messages = Array.from({ length: BATCH }, (_, i) => `${String(i).padStart(6, "0")}-${"x".repeat(SIZE - 7)}`);
  let run = 0;
  try {
    progress("warm-up (not measured)");
    await vqueueRun(onUnstorage(server, `warm-${run}`), messages, Math.ceil(COUNT / 10));
    await vqueueRun(onRedis(server, `warm-${run}`), messages, Math.ceil(COUNT / 10));
    await streamsRun(server, `warm-${run}`, messages, Math.ceil(COUNT / 10));
    const vq = { push: [] as Sample[], read: [] as Sample[] };
    const vr = { push: [] as Sample[], read: [] as Sample[] };
    const xs = { push: [] as Sample[], read: [] as Sample[] };
    for (let i = 0; i < REPEATS; i++) {
      progress(`run ${i + 1}/${REPEATS}: v-queue on unstorage/redis, on drivers/redis, then Redis Streams`);
      const a = await vqueueRun(onUnstorage(server, `run-${++run}`), messages, COUNT);
      vq.push.push(a.push);
      vq.read.push(a.read);
      const r = await vqueueRun(onRedis(server, `run-${run}`), messages, COUNT);
      vr.push.push(r.push);
      vr.read.push(r.read);
      const b = await streamsRun(server, `run-${run}`, messages, COUNT);
      xs.push.push(b.push);
      xs.read.push(b.read);
    }
    const median = (samples: Sample[]) => repeat(samples.length, async (i) => samples[i]!);
    for (const [label, ours] of [
      ["unstorage/redis", vq],
      ["drivers/redis", vr],
    ] as const) {
      const rows: [string, Rate, Rate][] = [
        [`push ${formatRate(COUNT)} x ${SIZE} B, batches of ${BATCH}`, await median(ours.push), await median(xs.push)],
        [`consume + commit, reads of ${BATCH}`, await median(ours.read), await median(xs.read)],
      ];
      console.log(
        formatTable(
          ["scenario", `v-queue ${label} msgs/s`, "Redis Streams msgs/s", "ratio", "target", "result"],
          rows.map(([scenario, mine, streams]) => {
            const ratio = mine.msgsPerSec / streams.msgsPerSec;
            return [
              scenario,
              formatRate(mine.msgsPerSec),
              formatRate(streams.msgsPerSec),
              `${ratio.toFixed(2)} x`,
              `>= ${TARGET.toFixed(2)}`,
              ratio >= TARGET ? "PASS" : "FAIL",
            ];
          }),
        ),
      );
    }
  } finally {
    await server.stop();
  }
}

// --- Internal helpers ---

/** Two driver instances on one storage (the consumer's as another process would have), and what frees them. */
interface OnStorage {
  writer: QueueDriver;
  consumer: QueueDriver;
  dispose(): Promise<void>;
}

function onUnstorage(server: RedisServer, base: string): OnStorage {
  const storage: Storage = createStorage({ driver: redisStorageDriver({ url: server.url, scanCount: 1000 }) });
  return { writer: unstorageDriver({ storage, base }), consumer: unstorageDriver({ storage, base }), dispose: () => storage.dispose() };
}

function onRedis(server: RedisServer, prefix: string): OnStorage {
  const writer = redisDriver({ redis: server.url, prefix });
  const consumer = redisDriver({ redis: server.url, prefix });
  return { writer, consumer, dispose: async () => void (await Promise.all([writer.dispose?.(), consumer.dispose?.()])) };
}

/** Pushes `count` messages in `pushBatch(BATCH)` calls, then reads them back in reads of BATCH, committing each. */
async function vqueueRun(on: OnStorage, messages: string[], count: number): Promise<{ push: Sample; read: Sample }> {
  const driver = on.writer;
  try {
    const queue = await QueueWriter.open("bench", { driver, durability: "fsync", onProblem: quiet });
    let start = now();
    for (let sent = 0; sent < count; sent += BATCH) await queue.pushBatch(sent + BATCH <= count ? messages : messages.slice(0, count - sent));
    const push = { messages: count, bytes: count * SIZE, seconds: now() - start };
    await queue.close();
    // Another driver instance, as a consumer in another process would have.
    const consumer = await QueueConsumer.open("bench", "c", { driver: on.consumer, onProblem: quiet });
    start = now();
    let got = 0;
    while (got < count) {
      const batch = await consumer.read({ max: BATCH });
      if (batch.length === 0) throw new Error(`v-queue: only ${got} of ${count} messages came back`);
      got += batch.length;
      await consumer.commit();
    }
    const read = { messages: got, bytes: got * SIZE, seconds: now() - start };
    await consumer.close();
    return { push, read };
  } finally {
    await on.dispose();
  }
}

/** The same through Redis Streams: XADD pipelined per batch; XREADGROUP COUNT BATCH then XACK per batch. */
async function streamsRun(server: RedisServer, name: string, messages: string[], count: number): Promise<{ push: Sample; read: Sample }> {
  const redis = new Redis(server.url);
  const key = `stream-${name}`;
  try {
    let start = now();
    for (let sent = 0; sent < count; sent += BATCH) {
      const pipeline = redis.pipeline();
      const n = Math.min(BATCH, count - sent);
      for (let i = 0; i < n; i++) pipeline.xadd(key, "*", "m", messages[i]!);
      const results = await pipeline.exec();
      const failed = results?.find(([error]) => error);
      if (failed) throw failed[0];
    }
    const push = { messages: count, bytes: count * SIZE, seconds: now() - start };
    await redis.xgroup("CREATE", key, "c", "0");
    start = now();
    let got = 0;
    while (got < count) {
      const reply = (await redis.xreadgroup("GROUP", "c", "reader", "COUNT", BATCH, "STREAMS", key, ">")) as [string, [string, string[]][]][] | null;
      const entries = reply?.[0]?.[1] ?? [];
      if (entries.length === 0) throw new Error(`Redis Streams: only ${got} of ${count} messages came back`);
      got += entries.length;
      await redis.xack(key, "c", ...entries.map(([id]) => id));
    }
    const read = { messages: got, bytes: got * SIZE, seconds: now() - start };
    await redis.del(key);
    return { push, read };
  } finally {
    redis.disconnect();
  }
}
