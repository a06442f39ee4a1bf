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
 * Beside the plain rows of in process, HTTP and BullMQ, issue 40's feature rows (shared-features.ts),
 * each the same drain with one feature, as a ratio to the plain row it mirrors in the same run:
 * messages produced with priorities (shared-priority.ts), in groups (shared-groups.ts), and a rate
 * limit never reached (in process against `syncCommits: false`, over HTTP the server's
 * `shared.limiter`, BullMQ's Worker `limiter`); and v-queue's against BullMQ's with the same feature.
 * Then a run of 1,000,000 messages through the in-process shared consumer, sampling memory
 * (shared-memory.ts). VQ_BENCH_SCALE shrinks the counts, VQ_BENCH_REPEATS sets the runs,
 * VQ_BENCH_SHARED_PARTS=inproc,http,bullmq,streams,priority,groups,limiter,outcomes,memory picks parts
 * (`priority`, `groups` and `limiter` add that feature's row to each of inproc, http and bullmq picked).
 */
import { createClient } from "v-queue/client";
import { openQueue, openSharedConsumer, type SharedConsumerOptions } from "v-queue";
import { startChild } from "./http";
import { startRedisServer, type RedisServer } from "./redis-server";
import { bullmqDrain, streamsDrain, type Drain, type DrainSetup } from "./shared-baselines";
import { drainShared } from "./shared-drain";
import { isBaseline, MIRRORS, printFeatureCost, type Scenario } from "./shared-features";
import { GroupMix, GroupOrder } from "./shared-groups";
import { bodyOf, EarlyShare, runsOf } from "./shared-priority";
import { runSharedMemory } from "./shared-memory";
import { formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const PARTS = new Set((process.env.VQ_BENCH_SHARED_PARTS || "inproc,http,bullmq,streams,priority,groups,limiter,outcomes,memory").split(","));
const SETUP: DrainSetup = { messages: Math.round(100_000 * SCALE), concurrency: 8, batch: 100, payload: "x".repeat(100) };
/** The figures on this machine, used when a baseline cannot run here. */
const REFERENCE = { bullmq: 12_000, streams: 112_000 };
const TARGETS = { http: 2, inproc: 10, feature: 0.8 };
/** A rate limit above what the drain reaches: what counting hand-outs costs, against no limit. */
const NEVER_REACHED = { max: 1_000_000, durationMs: 1000 };
/** Issue 40's groups: 10,000 over the 100,000 messages. */
const GROUPS = new GroupMix(SETUP.messages, Math.round(10_000 * SCALE));
/** HTTP produce calls in flight at once while filling a queue (a call per run of one group). */
const HTTP_PRODUCERS = 32;

/** What the messages of a drain were produced with. */
type Mix = "plain" | "priority" | "groups";

export async function runSharedBench(): Promise<void> {
  console.log(
    `\n## Shared consumers: ${SETUP.messages} messages of 100 B, ${SETUP.concurrency} concurrent workers, each message acknowledged, no-op handler (median of ${REPEATS} interleaved runs)\n`,
  );
  const never = `never reached (${NEVER_REACHED.max} per ${NEVER_REACHED.durationMs} ms)`;
  const grouped = `messages produced in ${GROUPS.groups} groups (${SETUP.messages / GROUPS.groups} each, shuffled)`;
  const scenarios: Scenario[] = [
    { key: "inproc", label: `v-queue shared consumer in process, fs, default options (syncCommits: true), poll max ${SETUP.batch} + ack each`, seconds: [] },
    { key: "inproc-prio", label: `the same, messages produced with priorities (90 % at 0, 10 % over 1..9)`, seconds: [] },
    { key: "inproc-groups", label: `the same, ${grouped}`, seconds: [] },
    { key: "inproc-no-outcomes", label: "the same with outcomes: false (none kept)", seconds: [] },
    { key: "inproc-nosync", label: `v-queue shared consumer in process, fs, syncCommits: false, poll max ${SETUP.batch} + ack each`, seconds: [] },
    { key: "inproc-limited", label: `the same with a rate limit ${never}`, seconds: [] },
    {
      key: "http",
      label: `v-queue over HTTP, client worker() concurrency ${SETUP.concurrency} (server: durability interval, syncCommits: false)`,
      seconds: [],
    },
    { key: "http-prio", label: `the same, messages produced with priorities`, seconds: [] },
    { key: "http-groups", label: `the same, ${grouped}`, seconds: [] },
    { key: "http-limited", label: `the same with the server's shared.limiter ${never}`, seconds: [] },
    { key: "http-no-outcomes", label: "the same with the server's shared.outcomes: false (none kept)", seconds: [] },
    { key: "bullmq", label: `BullMQ 6.7.6 Worker concurrency ${SETUP.concurrency}, removeOnComplete (redis AOF everysec)`, seconds: [] },
    { key: "bullmq-prio", label: `the same, jobs added with the same priorities (BullMQ's: 10 - p, 1 highest)`, seconds: [] },
    { key: "bullmq-limited", label: `the same with the Worker's limiter ${never}`, seconds: [] },
    { key: "streams", label: `Redis Streams group, ${SETUP.concurrency} consumers, XREADGROUP COUNT ${SETUP.batch} + pipelined XACK per message`, seconds: [] },
  ];
  const byKey = (key: string) => scenarios.find((s) => s.key === key)!;
  const closers: (() => Promise<void>)[] = [];
  const setUp = async (scenario: Scenario, part: string, make: () => Promise<Drain>) => {
    const feature = MIRRORS[scenario.key]?.feature;
    const picked = PARTS.has(part) && (feature === undefined || PARTS.has(feature));
    if (!picked) return void (scenario.skipped = "not selected (VQ_BENCH_SHARED_PARTS)");
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
    await setUp(byKey("inproc-prio"), "inproc", () => inProcessDrain({}, "priority"));
    await setUp(byKey("inproc-groups"), "inproc", () => inProcessDrain({}, "groups"));
    await setUp(byKey("inproc-no-outcomes"), "inproc", () => inProcessDrain({ outcomes: false }));
    await setUp(byKey("inproc-nosync"), "inproc", () => inProcessDrain({ syncCommits: false }));
    await setUp(byKey("inproc-limited"), "inproc", () => inProcessDrain({ syncCommits: false, limiter: NEVER_REACHED }));
    await setUp(byKey("http"), "http", () => httpDrain());
    await setUp(byKey("http-prio"), "http", () => httpDrain("priority"));
    await setUp(byKey("http-groups"), "http", () => httpDrain("groups"));
    await setUp(byKey("http-limited"), "http", () => httpDrain("plain", { limiter: NEVER_REACHED }));
    await setUp(byKey("http-no-outcomes"), "http", () => httpDrain("plain", { outcomes: false }));
    let redis: RedisServer | undefined;
    if (PARTS.has("bullmq") || PARTS.has("streams")) {
      redis = await startRedisServer().catch((error: Error) => {
        for (const s of scenarios) if (isBaseline(s.key)) s.skipped = error.message;
        progress(`Redis baselines skipped: ${error.message}`);
        return undefined;
      });
      if (redis) closers.push(redis.stop);
    }
    if (redis || !PARTS.has("bullmq")) {
      await setUp(byKey("bullmq"), "bullmq", () => bullmqDrain(redis!, SETUP));
      await setUp(byKey("bullmq-prio"), "bullmq", () => bullmqDrain(redis!, SETUP, { prioritized: true }));
      const limiter = { max: NEVER_REACHED.max, duration: NEVER_REACHED.durationMs };
      await setUp(byKey("bullmq-limited"), "bullmq", () => bullmqDrain(redis!, SETUP, { limiter }));
    }
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
    const plain = MIRRORS[s.key]?.plain;
    const [target, targetText] =
      s.key === "http"
        ? [TARGETS.http * faster, `>= ${TARGETS.http}x faster baseline`]
        : s.key === "inproc"
          ? [TARGETS.inproc * bullmq, `>= ${TARGETS.inproc}x BullMQ`]
          : isBaseline(s.key)
            ? [undefined, "baseline"]
            : plain
              ? [TARGETS.feature * rate(get(plain)), `>= ${TARGETS.feature}x ${plain === "inproc-nosync" ? "no limit (syncCommits: false)" : "plain (below)"}`]
              : [undefined, "informative"];
    return [
      s.label,
      formatRate(r),
      `${formatRate(Math.min(...runs))}-${formatRate(Math.max(...runs))}`,
      `${(r / faster).toFixed(2)}x`,
      `${(r / bullmq).toFixed(2)}x`,
      targetText,
      target === undefined || !Number.isFinite(target) ? "" : r >= target ? "PASS" : "FAIL",
    ];
  });
  console.log(formatTable(["scenario", "msgs/s", "runs (min-max)", "vs faster baseline", "vs BullMQ", "target", "result"], rows));
  const note = (key: "bullmq" | "streams") =>
    Number.isFinite(rate(get(key))) ? "measured now" : `the issue's ${formatRate(REFERENCE[key])}/s (not measured: ${get(key).skipped})`;
  console.log(`\nBaselines: BullMQ ${note("bullmq")}, Redis Streams ${note("streams")}; faster baseline ${formatRate(faster)}/s.`);
  printFeatureCost(scenarios, rate, TARGETS.feature);
}

// --- v-queue drains ---

/** The options of one produce call: a run of one priority, or of one group. */
type RunOptions = { priority?: number; group?: string };

/**
 * Calls `produce` for each batch of 1000 (fewer at the end): once with the batch, or for a mix
 * once per run of one priority or group in it, `parallel` runs at once (all: one write in process).
 */
async function produceAll(mix: Mix, produce: (bodies: string[], options?: RunOptions) => Promise<unknown>, parallel = Infinity): Promise<void> {
  const batch = Array.from({ length: 1000 }, () => SETUP.payload);
  for (let sent = 0; sent < SETUP.messages; sent += 1000) {
    const end = Math.min(SETUP.messages, sent + 1000);
    if (mix === "plain") {
      await produce(batch.slice(0, end - sent));
      continue;
    }
    const runs =
      mix === "priority"
        ? runsOf(sent, end).map(({ from, count, priority }) => ({ from, count, options: { priority }, body: bodyOf }))
        : GROUPS.runsOf(sent, end).map(({ from, count, group }) => ({ from, count, options: { group }, body: GROUPS.bodyOf.bind(GROUPS) }));
    for (let at = 0; at < runs.length; at += parallel)
      await Promise.all(
        runs.slice(at, at + parallel).map((run) =>
          produce(
            Array.from({ length: run.count }, (_, i) => run.body(run.from + i, SETUP.payload)),
            run.options,
          ),
        ),
      );
  }
}

/** What a drain of a mix checks in each message handed out, and keeps of each run (see the Drain fields). */
interface MixCheck {
  see(data: unknown): void;
  keep(drain: Drain): void;
}

function checkOf(mix: Mix): MixCheck | undefined {
  if (mix === "priority") {
    const early = new EarlyShare(SETUP.messages);
    return { see: (data) => early.see(data), keep: (drain) => (drain.early ??= []).push(early.share) };
  }
  if (mix === "groups") {
    const order = new GroupOrder(GROUPS.groups);
    return { see: (data) => order.see(data), keep: (drain) => (drain.outOfOrder ??= []).push(order.outOfOrder) };
  }
  return undefined;
}

async function fill(dir: string, mix: Mix): Promise<void> {
  const writer = await openQueue("bench", { dir });
  await produceAll(mix, (bodies, options) => (options === undefined ? writer.pushBatch(bodies) : writer.produce(bodies, options)));
  await writer.close();
}

/** Each run a new shared consumer name on the same filled queue: each drains all of it. */
async function inProcessDrain(options: SharedConsumerOptions, mix: Mix = "plain"): Promise<Drain> {
  const dir = tempDir("shared");
  await fill(dir, mix);
  const drain: Drain = {
    async run(round) {
      const consumer = await openSharedConsumer("bench", `s${round}`, { ...options, dir });
      const check = checkOf(mix);
      try {
        const onLeased = check ? (message: { data: unknown }) => check.see(message.data) : undefined;
        const seconds = await drainShared(consumer, SETUP.messages, SETUP.concurrency, SETUP.batch, undefined, onLeased);
        check?.keep(drain);
        return seconds;
      } finally {
        await consumer.close();
      }
    },
    close: async () => removeDir(dir),
  };
  return drain;
}

// --- Over HTTP, with the client's worker() (its defaults but concurrency) ---

/** `shared`: the server's consumer defaults (`limiter`). */
async function httpDrain(mix: Mix = "plain", shared?: SharedConsumerOptions): Promise<Drain> {
  const dir = tempDir("shared-http");
  const server = await startChild("vqueue", dir, shared);
  const client = createClient({ baseURL: `http://127.0.0.1:${server.port}` });
  await produceAll(mix, (bodies, options) => client.produce("bench", bodies, { format: "binary", ...options }), HTTP_PRODUCERS);
  const drain: Drain = {
    async run(round) {
      let handled = 0;
      let all!: () => void;
      const handledAll = new Promise<void>((resolve) => (all = resolve));
      const check = checkOf(mix);
      const handler = check
        ? (message: { data: unknown }) => {
            check.see(message.data);
            if (++handled === SETUP.messages) all();
          }
        : () => void (++handled === SETUP.messages && all());
      const start = performance.now();
      const running = client.worker("bench", `w${round}`, handler, { concurrency: SETUP.concurrency });
      // stop() waits for the last handlers' acks: the time includes them.
      await Promise.race([handledAll, running.done]);
      await running.stop();
      await running.done;
      const seconds = (performance.now() - start) / 1000;
      if (handled < SETUP.messages) throw new Error(`worker() handled ${handled} of ${SETUP.messages} messages`);
      check?.keep(drain);
      return seconds;
    },
    async close() {
      await server.stop();
      removeDir(dir);
    },
  };
  return drain;
}
