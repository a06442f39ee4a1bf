// Over 300 lines: one benchmark and its baselines in one run, so that they share the machine's moment.
/**
 * The HTTP benchmark of issue 3, in one run beside its baselines:
 * - a bare `node:http` server answering "ok" (the ceiling for one request, same client);
 * - Redis Streams through ioredis (XADD pipelined, XREADGROUP COUNT 1000 with XACK of each
 *   batch, as v-queue commits each batch; NOACK too, for reference), on a local redis-server
 *   with AOF everysec (skipped, and said so, when redis-server is missing);
 * - v-queue's HTTP API (the built `v-queue/server`, in its own process): produce in batches
 *   of 1000 (JSON and binary), consume in batches of 1000 (JSON and binary, each batch
 *   committed), and the time from a push to its delivery to a parked long poll, with 1,000
 *   long polls parked.
 * Servers run in child processes; this process is the client. Each part is time-bounded.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Agent, request } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { default as Redis } from "ioredis";
import { BATCH_CONTENT_TYPE, decodeBatch, encodeProduceBatch } from "../protocol/binary";
import { sleep } from "../src/core/sleep";
import { startRedisServer } from "./redis-server";
import { formatRate, formatTable, progress, removeDir, tempDir } from "./util";

const SECONDS = Number(process.env.VQ_BENCH_HTTP_SECONDS) || 2;
/** Each throughput figure is the median of this many runs (the machine is shared and noisy). */
const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const CONCURRENCY = 4;
const BATCH = 1000;
const SIZE = 100;
const PARKED = Number(process.env.VQ_BENCH_HTTP_PARKED) || 1000;
const LATENCY_SAMPLES = 500;
/** Deliveries before the measured ones: the server's code paths get compiled first. */
const LATENCY_WARMUP = 30;
const REDIS = { produce: 86_000, consume: 125_000 };
/** VQ_BENCH_HTTP_PARTS=bare,redis,produce,consume,latency picks parts (all by default). */
const PARTS = new Set((process.env.VQ_BENCH_HTTP_PARTS || "bare,redis,produce,consume,latency").split(","));

interface Row {
  scenario: string;
  value: string;
  ratio: string;
  target: string;
}

export async function runHttpBench(): Promise<void> {
  console.log(
    `\n## HTTP API (v-queue/server in a child process, ${CONCURRENCY} concurrent clients, ${SIZE}-byte messages, median of ${REPEATS} runs of ${SECONDS} s)\n`,
  );
  const rows: Row[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: PARKED + 64 });
  const payloads = Array.from({ length: BATCH }, (_, i) => `${i}`.padEnd(SIZE, "x"));
  const jsonBody = Buffer.from(JSON.stringify({ messages: payloads }));
  const binaryBody = Buffer.from(encodeProduceBatch(payloads));

  // 1. The ceiling: a bare node:http server answering "ok".
  let bareRate = Number.NaN;
  if (PARTS.has("bare")) {
    progress("bare node:http ...");
    const bare = await startChild("bare");
    try {
      bareRate = await medianOf(async () => (await runFor(CONCURRENCY * 8, async () => void (await call(agent, bare.port, "GET", "/")))) / SECONDS);
      rows.push({ scenario: "bare node:http 'ok' (requests/s, 32 clients)", value: formatRate(bareRate), ratio: "1.00x", target: "ceiling" });
      if (PARTS.has("latency")) {
        progress(`bare node:http round trip, ${PARKED} requests parked ...`);
        const trip = await bareRoundTrip(agent, bare.port);
        rows.push({
          scenario: `bare node:http one POST round trip, ${PARKED} others parked: p50 / p99 (ms)`,
          value: `${trip.p50.toFixed(2)} / ${trip.p99.toFixed(2)}`,
          ratio: "-",
          target: "floor",
        });
      }
    } finally {
      await bare.stop();
    }
  }

  // 2. Redis Streams, measured here when possible.
  let skipped = "not selected (VQ_BENCH_HTTP_PARTS)";
  const redis = await (PARTS.has("redis") ? measureRedis(payloads) : Promise.reject(new Error(skipped))).catch((error: Error) => {
    skipped = error.message;
    progress(`Redis baseline skipped: ${error.message}`);
    return undefined;
  });
  const redisProduce = redis?.produce ?? REDIS.produce;
  const redisConsume = redis?.consume.ack ?? REDIS.consume;
  const redisConsume1 = redis?.consume1.ack ?? REDIS.consume;
  const redisNote = redis ? "measured now" : `the issue's figures (baseline skipped: ${skipped})`;
  if (redis) {
    rows.push({ scenario: "Redis Streams XADD, pipelined 1000 (msgs/s)", value: formatRate(redis.produce), ratio: "-", target: "baseline" });
    for (const [consumers, rates] of [
      [CONCURRENCY, redis.consume],
      [1, redis.consume1],
    ] as const) {
      const who = `${consumers} consumer${consumers === 1 ? "" : "s"}`;
      rows.push({ scenario: `Redis Streams XREADGROUP COUNT 1000 + XACK, ${who} (msgs/s)`, value: formatRate(rates.ack), ratio: "-", target: "baseline" });
      rows.push({
        scenario: `Redis Streams XREADGROUP COUNT 1000 NOACK, ${who} (msgs/s)`,
        value: formatRate(rates.noack),
        ratio: "-",
        target: "no progress kept",
      });
    }
  } else rows.push({ scenario: "Redis Streams", value: "skipped", ratio: "-", target: redisNote });

  // 3. v-queue over HTTP.
  const dir = tempDir("http");
  const server = await startChild("vqueue", dir);
  try {
    for (const [label, body, type] of [
      ["JSON", jsonBody, "application/json"],
      ["binary", binaryBody, BATCH_CONTENT_TYPE],
    ] as const) {
      if (!PARTS.has("produce") && !PARTS.has("consume")) break;
      progress(`HTTP produce (${label}) ...`);
      const rate = await medianOf(async () => {
        const n = await runFor(CONCURRENCY, async () => {
          const res = await call(agent, server.port, "POST", `/api/v1/queues/bench/messages`, body, { "content-type": type });
          if (res.status !== 201) throw new Error(`produce: ${res.status} ${res.body}`);
        });
        return (n * BATCH) / SECONDS;
      });
      rows.push({
        scenario: `v-queue HTTP produce, ${label}, batches of 1000 (msgs/s)`,
        value: formatRate(rate),
        ratio: `${(rate / redisProduce).toFixed(2)}x Redis`,
        target: ">= 2x Redis",
      });
    }
    let run = 0;
    for (const consumers of [CONCURRENCY, 1]) {
      for (const binary of [false, true]) {
        if (!PARTS.has("consume")) break;
        progress(`HTTP consume (${binary ? "binary" : "JSON"}, ${consumers} consumers) ...`);
        const rate = await medianOf(() => consumeRate(agent, server.port, `c${run++}-`, binary, consumers));
        const reference = consumers === 1 ? redisConsume1 : redisConsume;
        rows.push({
          scenario: `v-queue HTTP consume, ${binary ? "binary" : "JSON"}, ${consumers} consumer${consumers === 1 ? "" : "s"}, batches of 1000, each committed (msgs/s)`,
          value: formatRate(rate),
          ratio: `${(rate / reference).toFixed(2)}x Redis XACK`,
          target: ">= 2x Redis",
        });
      }
    }
    const lat = PARTS.has("latency") ? (progress(`long-poll latency, ${PARKED} polls parked ...`), await longPollLatency(agent, server.port)) : undefined;
    if (lat)
      rows.push({
        scenario: `push -> parked long poll, ${PARKED} others parked, ${LATENCY_SAMPLES} deliveries: p50 / p99 (ms)`,
        value: `${lat.single.p50.toFixed(2)} / ${lat.single.p99.toFixed(2)}`,
        ratio: "-",
        target: "p99 < 5 ms",
      });
    if (lat)
      rows.push({
        scenario: `one push -> all ${PARKED} parked polls of one queue: p50 / p99 / last (ms)`,
        value: `${lat.fanout.p50.toFixed(1)} / ${lat.fanout.p99.toFixed(1)} / ${lat.fanout.max.toFixed(1)}`,
        ratio: "-",
        target: "informative",
      });
  } finally {
    await server.stop();
    removeDir(dir);
    agent.destroy();
  }
  console.log(
    formatTable(
      ["scenario", "result", "ratio", "target"],
      rows.map((r) => [r.scenario, r.value, r.ratio, r.target]),
    ),
  );
  console.log(
    `\nbare node:http: ${formatRate(bareRate)} requests/s. Redis: ${redisNote}. Server: durability "interval" (fsync every 200 ms, as AOF everysec), commits not fsynced.`,
  );
}

// --- Scenarios ---

/**
 * `consumers` consumers, each reading the whole queue in batches of 1000; each batch is
 * committed, by the next request (`?commit=`), or by a last POST .../commit.
 */
export async function consumeRate(agent: Agent, port: number, tag: string, binary: boolean, consumers: number): Promise<number> {
  const start = performance.now();
  const deadline = start + SECONDS * 1000;
  const counts = await Promise.all(
    Array.from({ length: consumers }, async (_, c) => {
      let n = 0;
      let cursor: string | null = null;
      const base = `/api/v1/queues/bench/consumers/${tag}${c}`;
      while (performance.now() < deadline) {
        const commit = cursor ? `&commit=${cursor}` : "";
        const res = await call(agent, port, "GET", `${base}/messages?max_messages=${BATCH}${commit}`, undefined, binary ? { accept: BATCH_CONTENT_TYPE } : {});
        if (res.status !== 200) throw new Error(`consume: ${res.status} ${res.body}`);
        let got: number;
        if (binary) {
          got = decodeBatch(res.body).length;
          cursor = (res.headers["x-vq-cursor"] as string | undefined) ?? cursor;
        } else {
          const body = JSON.parse(res.body.toString()) as { messages: { data: string }[]; cursor: string | null };
          got = body.messages.length;
          cursor = body.cursor ?? cursor;
        }
        if (got === 0) break; // read it all
        n += got;
      }
      if (cursor) await call(agent, port, "POST", `${base}/commit?cursor=${cursor}`);
      return n;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / ((performance.now() - start) / 1000);
}

async function longPollLatency(agent: Agent, port: number) {
  // Seed queues so that every consumer has read what is there, then park.
  await call(agent, port, "POST", "/api/v1/queues/idle/messages", "seed", { "content-type": "text/plain" });
  await call(agent, port, "POST", "/api/v1/queues/lat/messages", "seed", { "content-type": "text/plain" });
  await call(agent, port, "GET", "/api/v1/queues/lat/consumers/probe/messages");
  const consumers = Array.from({ length: PARKED }, (_, i) => `p${i}`);
  for (let i = 0; i < consumers.length; i += 100)
    await Promise.all(consumers.slice(i, i + 100).map((c) => call(agent, port, "GET", `/api/v1/queues/idle/consumers/${c}/messages`)));
  const parked = consumers.map((c) => {
    const t = { at: 0 };
    const done = call(agent, port, "GET", `/api/v1/queues/idle/consumers/${c}/messages?timeout_ms=60000`).then(() => (t.at = performance.now()));
    return { t, done };
  });
  await sleep(1000);

  // One probe poll at a time on its own queue, while the 1,000 stay parked.
  const single: number[] = [];
  const deadline = performance.now() + SECONDS * 10_000;
  for (let i = 0; i < LATENCY_WARMUP + LATENCY_SAMPLES && performance.now() < deadline; i++) {
    const poll = call(agent, port, "GET", "/api/v1/queues/lat/consumers/probe/messages?timeout_ms=10000").then(() => performance.now());
    await sleep(3);
    const t0 = performance.now();
    const [, delivered] = await Promise.all([call(agent, port, "POST", "/api/v1/queues/lat/messages", `m${i}`, { "content-type": "text/plain" }), poll]);
    if (i >= LATENCY_WARMUP) single.push(delivered - t0);
  }
  // Then one push to their queue: all 1,000 are woken.
  const t0 = performance.now();
  await call(agent, port, "POST", "/api/v1/queues/idle/messages", "wake", { "content-type": "text/plain" });
  await Promise.all(parked.map((p) => p.done));
  const fanout = parked.map((p) => p.t.at - t0).sort((a, b) => a - b);
  return {
    single: { p50: percentile(single, 50), p99: percentile(single, 99) },
    fanout: { p50: percentile(fanout, 50), p99: percentile(fanout, 99), max: fanout.at(-1)! },
  };
}

interface RedisConsumeRates {
  /** XREADGROUP then XACK of each batch: the group keeps each consumer's progress. */
  ack: number;
  /** XREADGROUP NOACK: nothing is kept of what was read. */
  noack: number;
}

/** The latency floor: one small POST to a bare server, sampled as the long-poll deliveries are. */
async function bareRoundTrip(agent: Agent, port: number) {
  const parked = Array.from({ length: PARKED }, () => call(agent, port, "GET", "/park").catch(() => {}));
  await sleep(1000);
  const trips: number[] = [];
  for (let i = 0; i < LATENCY_WARMUP + LATENCY_SAMPLES; i++) {
    await sleep(3);
    const t0 = performance.now();
    await call(agent, port, "POST", "/", `m${i}`, { "content-type": "text/plain" });
    if (i >= LATENCY_WARMUP) trips.push(performance.now() - t0);
  }
  void parked; // answered by no one: they end when the server stops
  return { p50: percentile(trips, 50), p99: percentile(trips, 99) };
}

async function measureRedis(payloads: string[]): Promise<{ produce: number; consume: RedisConsumeRates; consume1: RedisConsumeRates }> {
  const server = await startRedisServer();
  try {
    const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => server.connect()));
    progress("Redis XADD pipelined ...");
    const produce = await medianOf(async () => {
      const produced = await runFor(CONCURRENCY, async (i) => {
        const pipeline = clients[i]!.pipeline();
        for (const p of payloads) pipeline.xadd("bench", "*", "d", p);
        await pipeline.exec();
      });
      return (produced * BATCH) / SECONDS;
    });
    progress("Redis XREADGROUP COUNT 1000 ...");
    let run = 0;
    const rates = async (readers: Redis[]) => ({
      ack: await medianOf(() => redisConsume(readers, `g${run++}`, true)),
      noack: await medianOf(() => redisConsume(readers, `g${run++}`, false)),
    });
    const consume = await rates(clients);
    const consume1 = await rates(clients.slice(0, 1));
    return { produce, consume, consume1 };
  } finally {
    await server.stop();
  }
}

/** A consumer group of `clients.length` consumers reading the stream in batches of 1000, acknowledging each (or NOACK). */
async function redisConsume(clients: Redis[], group: string, ack: boolean): Promise<number> {
  await clients[0]!.xgroup("CREATE", "bench", group, "0");
  const start = performance.now();
  const deadline = start + SECONDS * 1000;
  const counts = await Promise.all(
    clients.map(async (client, i) => {
      let n = 0;
      while (performance.now() < deadline) {
        const res = (await (ack
          ? client.xreadgroup("GROUP", group, `c${i}`, "COUNT", BATCH, "STREAMS", "bench", ">")
          : client.xreadgroup("GROUP", group, `c${i}`, "COUNT", BATCH, "NOACK", "STREAMS", "bench", ">"))) as [string, [string, string[]][]][] | null;
        const entries = res?.[0]?.[1] ?? [];
        if (entries.length === 0) break;
        if (ack) await client.xack("bench", group, ...entries.map(([id]) => id));
        n += entries.length;
      }
      return n;
    }),
  );
  return counts.reduce((a, b) => a + b, 0) / ((performance.now() - start) / 1000);
}

// --- Harness ---

export interface Child {
  port: number;
  stop(): Promise<void>;
}

/**
 * The server processes run plain JavaScript (no TypeScript loader in the measured process):
 * a bare node:http server, or the built `v-queue/server` (`npm run bench` builds first).
 */
const CHILD_CODE = {
  bare: `import { createServer } from "node:http";
// "/park" is never answered: the parked long polls of the latency floor.
const server = createServer((req, res) => (req.url === "/park" ? undefined : req.resume().once("end", () => res.end("ok"))));
server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: server.address().port })));
process.once("SIGTERM", () => process.exit(0));`,
  vqueue: `import { serveQueues } from "v-queue/server";
const shared = process.env.VQ_BENCH_HTTP_SHARED ? JSON.parse(process.env.VQ_BENCH_HTTP_SHARED) : undefined;
const server = await serveQueues({ dir: process.env.VQ_BENCH_HTTP_DIR, port: 0, durability: process.env.VQ_BENCH_HTTP_DURABILITY || "interval", syncCommits: false, shared, handleSignals: true });
console.log(JSON.stringify({ port: server.port }));`,
};

/** Starts a server process and waits for its port; `shared` is the v-queue server's `shared` config (its consumers' defaults). */
export async function startChild(mode: keyof typeof CHILD_CODE, dir?: string, shared?: object): Promise<Child> {
  const profile = process.env.VQ_BENCH_HTTP_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.VQ_BENCH_HTTP_PROFILE}`] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, "--input-type=module", "-e", CHILD_CODE[mode]], {
    cwd: fileURLToPath(new URL("..", import.meta.url)),
    env: { ...process.env, VQ_BENCH_HTTP_DIR: dir ?? "", VQ_BENCH_HTTP_SHARED: shared ? JSON.stringify(shared) : "" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`bench server (${mode}) exited with ${code}`)));
  });
  const { port } = JSON.parse(line) as { port: number };
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** The median of REPEATS runs of `measure`. */
async function medianOf(measure: () => Promise<number>): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < REPEATS; i++) values.push(await measure());
  return percentile(values, 50);
}

/** Runs `task` in `concurrency` loops for SECONDS; returns how many completed. */
export async function runFor(concurrency: number, task: (loop: number) => Promise<void>): Promise<number> {
  const deadline = performance.now() + SECONDS * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, i) => {
      while (performance.now() < deadline) {
        await task(i);
        n++;
      }
    }),
  );
  return n;
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export function call(agent: Agent, port: number, method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ agent, host: "127.0.0.1", port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
