/**
 * The shared-consumer benchmark of issue 13 (`npm run bench -- shared`): N messages of 100 B
 * drained by 8 concurrent workers, each message acknowledged, a no-op handler, all scenarios
 * in the same run, interleaved (one run of each, then again), each figure the median:
 * - v-queue's shared consumer in this process (fs driver, default options: `syncCommits`
 *   true, so each group commit of the journal is fsync'd), 8 loops of `poll({ max })` then an
 *   `ack` of each message (concurrent acks share one journal write); also with `syncCommits:
 *   false`, as the HTTP server below runs;
 * - v-queue over HTTP: the client's `worker()` (concurrency 8) against the built standalone
 *   server in a child process (bench/http.ts: durability "interval", `syncCommits: false`);
 * - BullMQ and Redis Streams on a local redis-server with AOF everysec (shared-baselines.ts).
 * Then a run of 1,000,000 messages through the in-process shared consumer, sampling memory
 * (shared-memory.ts). VQ_BENCH_SCALE shrinks the counts, VQ_BENCH_REPEATS sets the runs,
 * VQ_BENCH_SHARED_PARTS=inproc,http,bullmq,streams,memory picks parts.
 */
import { createClient } from "v-queue/client";
import { openQueue, openSharedConsumer, type SharedConsumerOptions } from "v-queue";
import { startChild } from "./http";
import { startRedisServer, type RedisServer } from "./redis-server";
import { bullmqDrain, streamsDrain, type Drain, type DrainSetup } from "./shared-baselines";
import { drainShared } from "./shared-drain";
import { runSharedMemory } from "./shared-memory";
import { formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const PARTS = new Set((process.env.VQ_BENCH_SHARED_PARTS || "inproc,http,bullmq,streams,memory").split(","));
const SETUP: DrainSetup = { messages: Math.round(100_000 * SCALE), concurrency: 8, batch: 100, payload: "x".repeat(100) };
/** The figures on this machine, used when a baseline cannot run here. */
const REFERENCE = { bullmq: 12_000, streams: 112_000 };
const TARGETS = { http: 2, inproc: 10, limited: 0.8 };
/** A rate limit above what the drain reaches: what counting hand-outs costs, against no limit. */
const NEVER_REACHED = { max: 1_000_000, durationMs: 1000 };

interface Scenario {
  key: string;
  label: string;
  drain?: Drain;
  skipped?: string;
  seconds: number[];
}

export async function runSharedBench(): Promise<void> {
  console.log(
    `\n## Shared consumers: ${SETUP.messages} messages of 100 B, ${SETUP.concurrency} concurrent workers, each message acknowledged, no-op handler (median of ${REPEATS} interleaved runs)\n`,
  );
  const scenarios: Scenario[] = [
    { key: "inproc", label: `v-queue shared consumer in process, fs, default options (syncCommits: true), poll max ${SETUP.batch} + ack each`, seconds: [] },
    { key: "inproc-nosync", label: `v-queue shared consumer in process, fs, syncCommits: false, poll max ${SETUP.batch} + ack each`, seconds: [] },
    {
      key: "inproc-limited",
      label: `the same with a rate limit never reached (limiter: max ${NEVER_REACHED.max} per ${NEVER_REACHED.durationMs} ms)`,
      seconds: [],
    },
    {
      key: "http",
      label: `v-queue over HTTP, client worker() concurrency ${SETUP.concurrency} (server: durability interval, syncCommits: false)`,
      seconds: [],
    },
    { key: "bullmq", label: `BullMQ 6.7.6 Worker concurrency ${SETUP.concurrency}, removeOnComplete (redis AOF everysec)`, seconds: [] },
    { key: "streams", label: `Redis Streams group, ${SETUP.concurrency} consumers, XREADGROUP COUNT ${SETUP.batch} + pipelined XACK per message`, seconds: [] },
  ];
  const byKey = (key: string) => scenarios.find((s) => s.key === key)!;
  const closers: (() => Promise<void>)[] = [];
  const setUp = async (scenario: Scenario, part: string, make: () => Promise<Drain>) => {
    if (!PARTS.has(part)) return void (scenario.skipped = "not selected (VQ_BENCH_SHARED_PARTS)");
    progress(`setting up: ${scenario.key} ...`);
    try {
      scenario.drain = await make();
      closers.push(() => scenario.drain!.close());
    } catch (error) {
      scenario.skipped = (error as Error).message;
      progress(`${scenario.key} skipped: ${scenario.skipped}`);
    }
  };
  try {
    await setUp(byKey("inproc"), "inproc", () => inProcessDrain({}));
    await setUp(byKey("inproc-nosync"), "inproc", () => inProcessDrain({ syncCommits: false }));
    await setUp(byKey("inproc-limited"), "inproc", () => inProcessDrain({ syncCommits: false, limiter: NEVER_REACHED }));
    await setUp(byKey("http"), "http", httpDrain);
    let redis: RedisServer | undefined;
    if (PARTS.has("bullmq") || PARTS.has("streams")) {
      redis = await startRedisServer().catch((error: Error) => {
        for (const key of ["bullmq", "streams"]) byKey(key).skipped = error.message;
        progress(`Redis baselines skipped: ${error.message}`);
        return undefined;
      });
      if (redis) closers.push(redis.stop);
    }
    if (redis || !PARTS.has("bullmq")) await setUp(byKey("bullmq"), "bullmq", () => bullmqDrain(redis!, SETUP));
    if (redis || !PARTS.has("streams")) await setUp(byKey("streams"), "streams", () => streamsDrain(redis!, SETUP));

    for (let round = 0; round < REPEATS; round++) {
      for (const scenario of scenarios) {
        if (!scenario.drain) continue;
        progress(`run ${round + 1}/${REPEATS}: ${scenario.key} ...`);
        scenario.seconds.push(await scenario.drain.run(round));
      }
    }
  } finally {
    for (const close of closers.reverse()) await close().catch((error: Error) => progress(`cleanup: ${error.message}`));
  }
  printTable(scenarios);
  if (PARTS.has("memory")) await runSharedMemory(Math.round(1_000_000 * SCALE), SETUP);
}

function printTable(scenarios: Scenario[]): void {
  const rate = (s: Scenario) => (s.seconds.length ? median(s.seconds.map((t) => SETUP.messages / t)) : Number.NaN);
  const get = (key: string) => scenarios.find((s) => s.key === key)!;
  const measured = (key: "bullmq" | "streams") => (Number.isFinite(rate(get(key))) ? rate(get(key)) : REFERENCE[key]);
  const bullmq = measured("bullmq");
  const faster = Math.max(bullmq, measured("streams"));
  const rows = scenarios.map((s) => {
    const r = rate(s);
    if (!Number.isFinite(r)) return [s.label, "skipped", "-", "-", "-", "-", s.skipped ?? ""];
    const runs = s.seconds.map((t) => SETUP.messages / t);
    const unlimited = rate(get("inproc-nosync"));
    const target =
      s.key === "http"
        ? TARGETS.http * faster
        : s.key === "inproc"
          ? TARGETS.inproc * bullmq
          : s.key === "inproc-limited" && Number.isFinite(unlimited)
            ? TARGETS.limited * unlimited
            : undefined;
    const targetText =
      s.key === "http"
        ? `>= ${TARGETS.http}x faster baseline`
        : s.key === "inproc"
          ? `>= ${TARGETS.inproc}x BullMQ`
          : s.key === "inproc-limited"
            ? `>= ${TARGETS.limited}x no limit (syncCommits: false)`
            : s.key === "inproc-nosync"
              ? "informative"
              : "baseline";
    return [
      s.label,
      formatRate(r),
      `${formatRate(Math.min(...runs))}-${formatRate(Math.max(...runs))}`,
      `${(r / faster).toFixed(2)}x`,
      `${(r / bullmq).toFixed(2)}x`,
      targetText,
      target === undefined ? "" : r >= target ? "PASS" : "FAIL",
    ];
  });
  console.log(formatTable(["scenario", "msgs/s", "runs (min-max)", "vs faster baseline", "vs BullMQ", "target", "result"], rows));
  const note = (key: "bullmq" | "streams") =>
    Number.isFinite(rate(get(key))) ? "measured now" : `the issue's ${formatRate(REFERENCE[key])}/s (not measured: ${get(key).skipped})`;
  console.log(`\nBaselines: BullMQ ${note("bullmq")}, Redis Streams ${note("streams")}; faster baseline ${formatRate(faster)}/s.`);
}

// --- v-queue drains ---

async function fill(dir: string): Promise<void> {
  const writer = await openQueue("bench", { dir });
  const batch = Array.from({ length: 1000 }, () => SETUP.payload);
  for (let sent = 0; sent < SETUP.messages; sent += 1000) await writer.pushBatch(batch.slice(0, Math.min(1000, SETUP.messages - sent)));
  await writer.close();
}

/** Each run a new shared consumer name on the same filled queue: each drains all of it. */
async function inProcessDrain(options: SharedConsumerOptions): Promise<Drain> {
  const dir = tempDir("shared");
  await fill(dir);
  return {
    async run(round) {
      const consumer = await openSharedConsumer("bench", `s${round}`, { ...options, dir });
      try {
        return await drainShared(consumer, SETUP.messages, SETUP.concurrency, SETUP.batch);
      } finally {
        await consumer.close();
      }
    },
    close: async () => removeDir(dir),
  };
}

// --- Over HTTP, with the client's worker() (its defaults but concurrency) ---

async function httpDrain(): Promise<Drain> {
  const dir = tempDir("shared-http");
  const server = await startChild("vqueue", dir);
  const client = createClient({ baseURL: `http://127.0.0.1:${server.port}` });
  const batch = Array.from({ length: 1000 }, () => SETUP.payload);
  for (let sent = 0; sent < SETUP.messages; sent += 1000)
    await client.produce("bench", batch.slice(0, Math.min(1000, SETUP.messages - sent)), { format: "binary" });
  return {
    async run(round) {
      let handled = 0;
      let all!: () => void;
      const handledAll = new Promise<void>((resolve) => (all = resolve));
      const start = performance.now();
      const running = client.worker("bench", `w${round}`, () => void (++handled === SETUP.messages && all()), { concurrency: SETUP.concurrency });
      // stop() waits for the last handlers' acks: the time includes them.
      await Promise.race([handledAll, running.done]);
      await running.stop();
      await running.done;
      const seconds = (performance.now() - start) / 1000;
      if (handled < SETUP.messages) throw new Error(`worker() handled ${handled} of ${SETUP.messages} messages`);
      return seconds;
    },
    async close() {
      await server.stop();
      removeDir(dir);
    },
  };
}
