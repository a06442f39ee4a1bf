/**
 * The dashboard and metrics benchmark of issue 14 (`npm run bench -- dashboard`):
 * (a) produce and consume throughput over HTTP (the built standalone server in a child process,
 *     fs driver, bench/http.ts's settings and loops) with the dashboard open, one client
 *     polling `GET /api/v1/overview?history=60` and `GET /api/v1/queues/bench/overview?history=300`
 *     every 2 s and a scrape of `GET /metrics` every second, beside the same run without them.
 *     Each run a fresh server (a monitor, once looked at, samples for 10 minutes: it would go on
 *     in the runs without the dashboard), the two modes interleaved, medians, the ratio.
 * (b) 1,000 queues with 10 consumers each, at different positions: the time of the first
 *     overview after start (it waits for the monitor's first sample at most `firstAnswerMs`,
 *     then names the queues not read yet), and of the first `/metrics` of another fresh server,
 *     how long until the first sample has read every queue, then of `GET /metrics` and
 *     `GET /api/v1/overview?history=60` (median, p95), and of one `storageOverview` of the
 *     directory in this process (what a background sample reads).
 * VQ_BENCH_REPEATS sets the rounds of (a); VQ_BENCH_DASHBOARD_QUEUES the queues of (b);
 * VQ_BENCH_DASHBOARD_PARTS=many runs (b) alone (`throughput,many` both, the default).
 */
import { Agent } from "node:http";
import { openConsumer, openQueue, positionAfter, storageOverview, type ConsumerPosition } from "v-queue";
import fsDriver from "v-queue/drivers/fs";
import { encodeProduceBatch, BATCH_CONTENT_TYPE } from "../protocol/binary";
import { formatPopInfo } from "../src/format/info";
import { popInfoPath } from "../src/storage/paths";
import { writeWhole } from "../src/storage/write-whole";
import { call, consumeRate, percentile, runFor, startChild } from "./http";
import { formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const ROUNDS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 7);
const QUEUES = Number(process.env.VQ_BENCH_DASHBOARD_QUEUES) || 1000;
const CONSUMERS = 10;
/** Same as bench/http.ts. */
const CONCURRENCY = 4;
const BATCH = 1000;
const SIZE = 100;
const SECONDS = Number(process.env.VQ_BENCH_HTTP_SECONDS) || 2;
const REQUESTS = 20;
const TARGET = { ratio: 0.95, ms: 100, firstMs: 200 };
const PARTS = new Set((process.env.VQ_BENCH_DASHBOARD_PARTS ?? "throughput,many").split(","));

export async function runDashboardBench(): Promise<void> {
  console.log(`\n## Dashboard and metrics (v-queue/server in a child process, fs driver, durability "interval")\n`);
  if (PARTS.has("throughput")) await throughput();
  if (PARTS.has("many")) await manyQueues();
}

// --- (a) throughput with and without the dashboard open ---

interface Looker {
  /** Requests answered, the statuses seen, and how long each took by path (ms): what the dashboard's requests cost under load. */
  requests: number;
  statuses: Set<number>;
  ms: Map<string, number[]>;
  stop(): void;
}

/** The dashboard's live polls (every 2 s) and a Prometheus scrape (every second, when there is a /metrics). */
function openDashboard(agent: Agent, port: number, scrape: boolean): Looker {
  const looker: Looker = { requests: 0, statuses: new Set(), ms: new Map(), stop: () => timers.forEach(clearInterval) };
  const get = (path: string, t0 = performance.now()) =>
    void call(agent, port, "GET", path).then(
      (res) => {
        looker.requests++;
        looker.statuses.add(res.status);
        looker.ms.set(path, [...(looker.ms.get(path) ?? []), performance.now() - t0]);
      },
      () => {},
    );
  const poll = () => {
    get("/api/v1/overview?history=60");
    get("/api/v1/queues/bench/overview?history=300");
  };
  poll();
  if (scrape) get("/metrics");
  const timers = [setInterval(poll, 2000), ...(scrape ? [setInterval(() => get("/metrics"), 1000)] : [])];
  return looker;
}

async function throughput(): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const body = Buffer.from(encodeProduceBatch(Array.from({ length: BATCH }, (_, i) => `${i}`.padEnd(SIZE, "x"))));
  const produce = async (port: number) => {
    const res = await call(agent, port, "POST", "/api/v1/queues/bench/messages", body, { "content-type": BATCH_CONTENT_TYPE });
    if (res.status !== 201) throw new Error(`produce: ${res.status} ${res.body}`);
  };
  const runs = { off: { produce: [] as number[], consume: [] as number[] }, on: { produce: [] as number[], consume: [] as number[] } };
  let metrics: boolean | undefined;
  let looked = { requests: 0, statuses: new Set<number>(), ms: new Map<string, number[]>() };
  for (let round = 0; round < ROUNDS; round++) {
    // Alternating which goes first: a drift of the machine falls on both alike.
    for (const mode of round % 2 ? (["on", "off"] as const) : (["off", "on"] as const)) {
      const dir = tempDir("dashboard");
      const server = await startChild("vqueue", dir);
      try {
        for (let i = 0; i < 20; i++) await produce(server.port); // warm-up: compiled before it counts
        metrics ??= (await call(agent, server.port, "GET", "/metrics")).status === 200;
        progress(`round ${round + 1}/${ROUNDS}: ${mode === "on" ? `dashboard open${metrics ? " + /metrics scrape" : ""}` : "nobody looking"} ...`);
        const looker = mode === "on" ? openDashboard(agent, server.port, metrics) : undefined;
        try {
          runs[mode].produce.push(((await runFor(CONCURRENCY, () => produce(server.port))) * BATCH) / SECONDS);
          runs[mode].consume.push(await consumeRate(agent, server.port, `r${round}-`, true, CONCURRENCY));
        } finally {
          looker?.stop();
        }
        if (looker)
          looked = {
            requests: looked.requests + looker.requests,
            statuses: new Set([...looked.statuses, ...looker.statuses]),
            ms: new Map([...looker.ms].map(([path, ms]) => [path, [...(looked.ms.get(path) ?? []), ...ms]])),
          };
      } finally {
        await server.stop();
        removeDir(dir);
      }
    }
  }
  agent.destroy();
  const rows = (["produce", "consume"] as const).map((what) => {
    const off = runs.off[what];
    const on = runs.on[what];
    // Each round's two runs are side by side in time: their ratio drifts less than the medians'.
    const paired = median(on.map((rate, i) => rate / off[i]!));
    const spread = (values: number[]) => `${formatRate(Math.min(...values))}-${formatRate(Math.max(...values))}`;
    return [
      `HTTP ${what}, binary, batches of ${BATCH}, ${CONCURRENCY} clients (msgs/s)`,
      formatRate(median(off)),
      spread(off),
      formatRate(median(on)),
      spread(on),
      (median(on) / median(off)).toFixed(3),
      paired.toFixed(3),
      paired >= TARGET.ratio ? "PASS" : "FAIL",
    ];
  });
  console.log(
    formatTable(
      ["scenario", "nobody looking", "runs", "dashboard open", "runs", "medians open / not", "median of round ratios", `target >= ${TARGET.ratio}`],
      rows,
    ),
  );
  console.log(
    `\nMedian of ${ROUNDS} interleaved rounds of ${SECONDS} s, a fresh server each run. Dashboard: overview?history=60 and queues/bench/overview?history=300 every 2 s` +
      `${metrics ? ", /metrics every 1 s" : "; /metrics answered 404 on this build: no scrape in these runs"}` +
      ` (${looked.requests} requests answered, statuses ${[...looked.statuses].join(", ") || "none"}).`,
  );
  for (const [path, ms] of looked.ms)
    console.log(`  ${path} under load: p50 ${percentile(ms, 50).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms (${ms.length} requests)`);
}

// --- (b) 1,000 queues x 10 consumers ---

async function manyQueues(): Promise<void> {
  const dir = tempDir("dashboard-many");
  try {
    progress(`creating ${QUEUES} queues with ${CONSUMERS} consumers each ...`);
    const made = performance.now();
    await fill(dir);
    progress(`  made in ${((performance.now() - made) / 1000).toFixed(1)} s`);

    // What one background sample reads, in this process (the first pass measures the sealed parts' totals).
    const driver = fsDriver({ dir });
    const samples: number[] = [];
    for (let i = 0; i < 6; i++) {
      const t0 = performance.now();
      const queues = await storageOverview(driver);
      samples.push(performance.now() - t0);
      if (queues.length !== QUEUES) throw new Error(`storageOverview saw ${queues.length} queues, not ${QUEUES}`);
    }

    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const rows: string[][] = [];
    const timed = async (port: number, path: string) => {
      const t0 = performance.now();
      const res = await call(agent, port, "GET", path);
      return { ms: performance.now() - t0, status: res.status, bytes: res.body.length, body: res.body };
    };
    // The first /metrics of a fresh server (before this change, it waited for the whole first sample).
    const scraped = await startChild("vqueue", dir);
    try {
      const first = await timed(scraped.port, "/metrics");
      const pending = /^vqueue_monitor_queues_pending (\d+)$/m.exec(first.body.toString())?.[1];
      if (first.status === 200)
        rows.push([
          `first GET /metrics after start (a fresh server; ${pending === undefined ? "every queue" : `${QUEUES - Number(pending)} queues' series, ${pending} pending`})`,
          first.ms.toFixed(1),
          "-",
          "-",
          `${(first.bytes / 1024).toFixed(0)} KiB`,
          first.ms < TARGET.firstMs ? "PASS" : "FAIL",
        ]);
    } finally {
      await scraped.stop();
    }
    const server = await startChild("vqueue", dir);
    try {
      const started = performance.now();
      const first = await timed(server.port, "/api/v1/overview?history=60");
      if (first.status !== 200) throw new Error(`overview: ${first.status} ${first.body}`);
      const read = (body: Buffer) => JSON.parse(body.toString()) as { queues: unknown[]; pending?: string[] };
      const seen = read(first.body);
      rows.push([
        `first GET /api/v1/overview?history=60 after start (${seen.queues.length} queues, ${seen.pending?.length ?? "none"} pending)`,
        first.ms.toFixed(1),
        "-",
        "-",
        `${(first.bytes / 1024).toFixed(0)} KiB`,
        first.ms < TARGET.firstMs ? "PASS" : "FAIL",
      ]);
      // Until the first sample has read every queue (the dashboard's next polls fill in).
      let whole = seen;
      while ((whole.pending?.length ?? 0) > 0) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        whole = read((await timed(server.port, "/api/v1/overview")).body);
      }
      rows.push([`GET /api/v1/overview from start until no queue is pending`, (performance.now() - started).toFixed(1), "-", "-", "-", "informative"]);
      const metrics = (await timed(server.port, "/metrics")).status === 200;
      for (const path of [...(metrics ? ["/metrics"] : []), "/api/v1/overview?history=60", "/api/v1/overview"]) {
        const times: number[] = [];
        let last = first;
        for (let i = 0; i < REQUESTS; i++) {
          const r = (last = await timed(server.port, path));
          if (r.status !== 200) throw new Error(`${path}: ${r.status}`);
          times.push(r.ms);
          await new Promise((resolve) => setTimeout(resolve, 100)); // requests spread over samples, as a page's polls are
        }
        const p50 = percentile(times, 50);
        // The history holds only the samples taken since the start (not 60 yet): said with the figure.
        const points = path.includes("history")
          ? ` (${(JSON.parse(last.body.toString()) as { queues: { history?: { t: number[] } }[] }).queues[0]?.history?.t.length ?? 0} points of history)`
          : "";
        rows.push([
          `GET ${path}, ${REQUESTS} requests${points}`,
          p50.toFixed(1),
          percentile(times, 95).toFixed(1),
          Math.max(...times).toFixed(1),
          `${(last.bytes / 1024).toFixed(0)} KiB`,
          p50 < TARGET.ms ? "PASS" : "FAIL",
        ]);
      }
      if (!metrics) rows.push(["GET /metrics", "404", "-", "-", "-", "not on this build"]);
    } finally {
      agent.destroy();
      await server.stop();
    }
    rows.push([
      `storageOverview of the directory in process: first (measures the parts) / median of the next ${samples.length - 1}`,
      `${samples[0]!.toFixed(0)} / ${median(samples.slice(1)).toFixed(0)}`,
      "-",
      Math.max(...samples.slice(1)).toFixed(0),
      "-",
      "informative",
    ]);
    console.log(`\n${QUEUES} queues x ${CONSUMERS} consumers (${QUEUES * CONSUMERS} position files), a few messages each:\n`);
    console.log(formatTable(["request", "p50 ms", "p95 ms", "max ms", "size", `target < ${TARGET.firstMs} ms (first) / ${TARGET.ms} ms`], rows));
  } finally {
    removeDir(dir);
  }
}

/**
 * Queue `qNNNN`: 2 parts of a few messages; consumer `c9` reads 9 of them through the engine,
 * and `c0`..`c8` get the positions it passed on the way (position files written with the
 * engine's format: opening 10,000 consumers one by one would take most of the bench's time).
 */
export async function fill(dir: string): Promise<void> {
  const names = Array.from({ length: QUEUES }, (_, i) => `q${String(i).padStart(4, "0")}`);
  const driver = fsDriver({ dir });
  let next = 0;
  const lane = async () => {
    while (next < names.length) {
      const queue = names[next++]!;
      for (const batch of [5, 7]) {
        const writer = await openQueue(queue, { dir, durability: "none" });
        await writer.pushBatch(Array.from({ length: batch }, (_, i) => `message ${i} of ${queue}`));
        await writer.close();
      }
      const last = CONSUMERS - 1;
      const consumer = await openConsumer(queue, `c${last}`, { dir, syncCommits: false });
      const passed: ConsumerPosition[] = [{ part: 0, position: 0, count: 0 }];
      for (let c = 1; c < last; c++) passed.push(positionAfter((await consumer.poll({ max: 1, timeoutMs: 0 }))[0]!));
      await consumer.poll({ max: 1, timeoutMs: 0 });
      await consumer.commit();
      await consumer.close();
      for (const [c, at] of passed.entries())
        await writeWhole(driver, popInfoPath(queue, `c${c}`), encoder.encode(formatPopInfo({ queue, consumer: `c${c}`, ...at })), false);
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
}

const encoder = new TextEncoder();
