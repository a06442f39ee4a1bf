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
 * Beside the plain rows of in process (default options), HTTP and BullMQ, the same drain of
 * messages produced with priorities (issue 40; the mix is shared-priority.ts), each as a ratio
 * to its plain row of the same run, and v-queue's against BullMQ's with priorities.
 * Then a run of 1,000,000 messages through the in-process shared consumer, sampling memory
 * (shared-memory.ts). VQ_BENCH_SCALE shrinks the counts, VQ_BENCH_REPEATS sets the runs,
 * VQ_BENCH_SHARED_PARTS=inproc,http,bullmq,streams,priority,memory picks parts
 * (`priority` adds the priority row of each of inproc, http and bullmq that is picked).
 */
import { createClient } from "v-queue/client";
import { openQueue, openSharedConsumer, type SharedConsumerOptions } from "v-queue";
import { startChild } from "./http";
import { startRedisServer, type RedisServer } from "./redis-server";
import { bullmqDrain, streamsDrain, type Drain, type DrainSetup } from "./shared-baselines";
import { drainShared } from "./shared-drain";
import { bodyOf, EarlyShare, runsOf } from "./shared-priority";
import { runSharedMemory } from "./shared-memory";
import { formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const PARTS = new Set((process.env.VQ_BENCH_SHARED_PARTS || "inproc,http,bullmq,streams,priority,memory").split(","));
const SETUP: DrainSetup = { messages: Math.round(100_000 * SCALE), concurrency: 8, batch: 100, payload: "x".repeat(100) };
/** The figures on this machine, used when a baseline cannot run here. */
const REFERENCE = { bullmq: 12_000, streams: 112_000 };
const TARGETS = { http: 2, inproc: 10, limited: 0.8, feature: 0.8 };
/** A rate limit above what the drain reaches: what counting hand-outs costs, against no limit. */
const NEVER_REACHED = { max: 1_000_000, durationMs: 1000 };
/** Each priority row and the plain row it mirrors. */
const MIRRORS = { "inproc-prio": "inproc", "http-prio": "http", "bullmq-prio": "bullmq" } as const;

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
    { key: "inproc-prio", label: `the same, messages produced with priorities (90 % at 0, 10 % over 1..9)`, seconds: [] },
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
    { key: "http-prio", label: `the same, messages produced with priorities`, seconds: [] },
    { key: "bullmq", label: `BullMQ 6.7.6 Worker concurrency ${SETUP.concurrency}, removeOnComplete (redis AOF everysec)`, seconds: [] },
    { key: "bullmq-prio", label: `the same, jobs added with the same priorities (BullMQ's: 10 - p, 1 highest)`, seconds: [] },
    { key: "streams", label: `Redis Streams group, ${SETUP.concurrency} consumers, XREADGROUP COUNT ${SETUP.batch} + pipelined XACK per message`, seconds: [] },
  ];
  const byKey = (key: string) => scenarios.find((s) => s.key === key)!;
  const closers: (() => Promise<void>)[] = [];
  const setUp = async (scenario: Scenario, part: string, make: () => Promise<Drain>) => {
    const picked = PARTS.has(part) && (!(scenario.key in MIRRORS) || PARTS.has("priority"));
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
    await setUp(byKey("inproc-prio"), "inproc", () => inProcessDrain({}, true));
    await setUp(byKey("inproc-nosync"), "inproc", () => inProcessDrain({ syncCommits: false }));
    await setUp(byKey("inproc-limited"), "inproc", () => inProcessDrain({ syncCommits: false, limiter: NEVER_REACHED }));
    await setUp(byKey("http"), "http", () => httpDrain(false));
    await setUp(byKey("http-prio"), "http", () => httpDrain(true));
    let redis: RedisServer | undefined;
    if (PARTS.has("bullmq") || PARTS.has("streams")) {
      redis = await startRedisServer().catch((error: Error) => {
        for (const key of ["bullmq", "bullmq-prio", "streams"]) byKey(key).skipped = error.message;
        progress(`Redis baselines skipped: ${error.message}`);
        return undefined;
      });
      if (redis) closers.push(redis.stop);
    }
    if (redis || !PARTS.has("bullmq")) {
      await setUp(byKey("bullmq"), "bullmq", () => bullmqDrain(redis!, SETUP));
      await setUp(byKey("bullmq-prio"), "bullmq", () => bullmqDrain(redis!, SETUP, true));
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
    const unlimited = rate(get("inproc-nosync"));
    const mirror = mirrorOf(s.key);
    const target =
      s.key === "http"
        ? TARGETS.http * faster
        : s.key === "inproc"
          ? TARGETS.inproc * bullmq
          : s.key === "inproc-limited" && Number.isFinite(unlimited)
            ? TARGETS.limited * unlimited
            : mirror && s.key !== "bullmq-prio"
              ? TARGETS.feature * rate(get(mirror))
              : undefined;
    const targetText =
      s.key === "http"
        ? `>= ${TARGETS.http}x faster baseline`
        : s.key === "inproc"
          ? `>= ${TARGETS.inproc}x BullMQ`
          : s.key === "inproc-limited"
            ? `>= ${TARGETS.limited}x no limit (syncCommits: false)`
            : s.key === "bullmq-prio"
              ? "baseline"
              : mirror
                ? `>= ${TARGETS.feature}x plain (below)`
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
      target === undefined || !Number.isFinite(target) ? "" : r >= target ? "PASS" : "FAIL",
    ];
  });
  console.log(formatTable(["scenario", "msgs/s", "runs (min-max)", "vs faster baseline", "vs BullMQ", "target", "result"], rows));
  const note = (key: "bullmq" | "streams") =>
    Number.isFinite(rate(get(key))) ? "measured now" : `the issue's ${formatRate(REFERENCE[key])}/s (not measured: ${get(key).skipped})`;
  console.log(`\nBaselines: BullMQ ${note("bullmq")}, Redis Streams ${note("streams")}; faster baseline ${formatRate(faster)}/s.`);
  printPriorityCost(scenarios, rate);
}

function mirrorOf(key: string): string | undefined {
  return (MIRRORS as Record<string, string>)[key];
}

/**
 * Issue 40: each priority row against the plain row it mirrors (the ratio of medians, and of
 * each round, as they ran side by side), then v-queue's priority rows against BullMQ's.
 */
function printPriorityCost(scenarios: Scenario[], rate: (s: Scenario) => number): void {
  const get = (key: string) => scenarios.find((s) => s.key === key)!;
  const ran = scenarios.filter((s) => mirrorOf(s.key) && s.seconds.length > 0 && get(mirrorOf(s.key)!).seconds.length > 0);
  if (ran.length === 0) return;
  const percent = (shares: number[] | undefined) => (shares?.length ? shares.map((x) => `${(x * 100).toFixed(0)} %`).join(", ") : "-");
  const rows = ran.map((s) => {
    const plain = get(mirrorOf(s.key)!);
    const ratio = rate(s) / rate(plain);
    const rounds = s.seconds.map((t, i) => (plain.seconds[i] === undefined ? "-" : (plain.seconds[i]! / t).toFixed(2))).join(", ");
    const informative = s.key === "bullmq-prio";
    return [
      s.key,
      formatRate(rate(plain)),
      formatRate(rate(s)),
      `${ratio.toFixed(2)}x`,
      rounds,
      percent(s.drain?.early),
      informative ? "informative" : `>= ${TARGETS.feature}x`,
      informative ? "" : ratio >= TARGETS.feature ? "PASS" : "FAIL",
    ];
  });
  const bullmq = get("bullmq-prio");
  for (const key of ["inproc-prio", "http-prio"]) {
    const s = get(key);
    if (!s.seconds.length || !bullmq.seconds.length) continue;
    const rounds = s.seconds.map((t, i) => (bullmq.seconds[i] === undefined ? "-" : (bullmq.seconds[i]! / t).toFixed(2))).join(", ");
    rows.push([
      `${key} vs bullmq-prio`,
      formatRate(rate(bullmq)),
      formatRate(rate(s)),
      `${(rate(s) / rate(bullmq)).toFixed(2)}x`,
      rounds,
      "",
      "informative",
      "",
    ]);
  }
  console.log(`\n### Priorities (issue 40): with priorities / without, same run\n`);
  console.log(
    formatTable(
      [
        "row",
        "baseline msgs/s",
        "with priorities msgs/s",
        "ratio (medians)",
        "ratio per round",
        "priority > 0 in the first tenth handed out",
        "target",
        "result",
      ],
      rows,
    ),
  );
  console.log(`\nThe mix: 10 % of the messages have a priority (1..9); without priorities the first tenth would hold about 10 % of them.`);
}

// --- v-queue drains ---

/**
 * Calls `produce` for each batch of 1000 (fewer at the end): once with the batch, or with
 * priorities once per run of one priority in it, the runs of a batch at once (one write).
 */
async function produceAll(prioritized: boolean, produce: (bodies: string[], priority?: number) => Promise<unknown>): Promise<void> {
  const batch = Array.from({ length: 1000 }, () => SETUP.payload);
  for (let sent = 0; sent < SETUP.messages; sent += 1000) {
    const end = Math.min(SETUP.messages, sent + 1000);
    if (!prioritized) await produce(batch.slice(0, end - sent));
    else
      await Promise.all(
        runsOf(sent, end).map((run) =>
          produce(
            Array.from({ length: run.count }, (_, i) => bodyOf(run.from + i, SETUP.payload)),
            run.priority,
          ),
        ),
      );
  }
}

async function fill(dir: string, prioritized: boolean): Promise<void> {
  const writer = await openQueue("bench", { dir });
  await produceAll(prioritized, (bodies, priority) => (priority === undefined ? writer.pushBatch(bodies) : writer.produce(bodies, { priority })));
  await writer.close();
}

/** Each run a new shared consumer name on the same filled queue: each drains all of it. */
async function inProcessDrain(options: SharedConsumerOptions, prioritized = false): Promise<Drain> {
  const dir = tempDir("shared");
  await fill(dir, prioritized);
  const drain: Drain = {
    early: prioritized ? [] : undefined,
    async run(round) {
      const consumer = await openSharedConsumer("bench", `s${round}`, { ...options, dir });
      const early = new EarlyShare(SETUP.messages);
      try {
        const onLeased = prioritized ? (message: { data: unknown }) => early.see(message.data) : undefined;
        const seconds = await drainShared(consumer, SETUP.messages, SETUP.concurrency, SETUP.batch, undefined, onLeased);
        drain.early?.push(early.share);
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

async function httpDrain(prioritized: boolean): Promise<Drain> {
  const dir = tempDir("shared-http");
  const server = await startChild("vqueue", dir);
  const client = createClient({ baseURL: `http://127.0.0.1:${server.port}` });
  await produceAll(prioritized, (bodies, priority) => client.produce("bench", bodies, { format: "binary", priority }));
  const drain: Drain = {
    early: prioritized ? [] : undefined,
    async run(round) {
      let handled = 0;
      let all!: () => void;
      const handledAll = new Promise<void>((resolve) => (all = resolve));
      const early = new EarlyShare(SETUP.messages);
      const handler = prioritized
        ? (message: { data: unknown }) => {
            early.see(message.data);
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
      drain.early?.push(early.share);
      return seconds;
    },
    async close() {
      await server.stop();
      removeDir(dir);
    },
  };
  return drain;
}
