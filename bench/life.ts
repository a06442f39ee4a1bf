/**
 * A queue's life (issue 12): what retention costs pushes, what the part index costs pushes,
 * and how fast a seek by time and by sequence is on a queue of 10 million messages beside a
 * small one. `npm run bench -- life`. VQ_BENCH_SCALE shrinks the big queue, VQ_BENCH_REPEATS
 * sets the alternated runs (default 3), VQ_BENCH_LIFE_PARTS picks parts (default
 * "retention,index,seek").
 */
import { closeSync, openSync, readdirSync, writeSync } from "node:fs";
import { QueueConsumer, QueueWriter, type RetentionOptions } from "v-queue";
import fsDriver from "v-queue/drivers/fs";
import { formatRate, formatTable, inTempDir, median, now, progress } from "./util";

const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const PARTS = new Set((process.env.VQ_BENCH_LIFE_PARTS || "retention,index,seek").split(","));
const quiet = () => {};

export async function runLifeBench(): Promise<void> {
  console.log(`\n## A queue's life: retention, index, seek (fs driver), median of ${REPEATS} alternated runs${SCALE < 1 ? `, scale ${SCALE}` : ""}\n`);
  if (PARTS.has("retention")) await retentionCost();
  if (PARTS.has("index")) await indexCost();
  if (PARTS.has("seek")) await seekCost();
}

// --- Pushes while retention deletes parts, beside the same run without ---

const PRODUCERS = 4;
const PUSHES = 40_000;
/** p99 of a few thousand pushes moves a lot from run to run here: more runs than elsewhere. */
const LATENCY_REPEATS = Math.max(REPEATS, 5);
const BODY = "x".repeat(100);
const PART_BYTES = 256 * 1024; // a part every ~2,000 messages: ~40 parts a run
const RETENTION: RetentionOptions = { maxParts: 4, intervalMs: 100 };

interface PushRun {
  p50: number;
  p99: number;
  rate: number;
  deleted: number;
}

async function pushRun(retention: RetentionOptions | undefined): Promise<PushRun> {
  return inTempDir("life", async (dir) => {
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("q", { driver, durability: "fsync", maxPartBytes: PART_BYTES, retention, onProblem: quiet });
    const latencies: number[] = [];
    let next = 0;
    const start = now();
    await Promise.all(
      Array.from({ length: PRODUCERS }, async () => {
        while (next++ < PUSHES) {
          const t = now();
          await q.push(BODY);
          latencies.push((now() - t) * 1000);
        }
      }),
    );
    const seconds = now() - start;
    const parts = q.position.part + 1;
    await q.close();
    const left = readdirSync(dir).filter((name) => /^q-\d+$/.test(name)).length;
    latencies.sort((a, b) => a - b);
    return {
      p50: latencies[Math.floor(latencies.length * 0.5)]!,
      p99: latencies[Math.floor(latencies.length * 0.99)]!,
      rate: PUSHES / seconds,
      deleted: parts - left,
    };
  });
}

async function retentionCost(): Promise<void> {
  progress("push latency with and without retention (alternated)");
  const off: PushRun[] = [];
  const on: PushRun[] = [];
  await pushRun(undefined); // warm-up
  for (let i = 0; i < LATENCY_REPEATS; i++) {
    off.push(await pushRun(undefined));
    on.push(await pushRun(RETENTION));
  }
  const row = (label: string, runs: PushRun[]) => [
    label,
    `${median(runs.map((r) => r.p50)).toFixed(3)} ms`,
    `${median(runs.map((r) => r.p99)).toFixed(3)} ms (${Math.min(...runs.map((r) => r.p99)).toFixed(2)}-${Math.max(...runs.map((r) => r.p99)).toFixed(2)})`,
    `${formatRate(median(runs.map((r) => r.rate)))}/s`,
    String(median(runs.map((r) => r.deleted))),
  ];
  console.log(
    `median of ${LATENCY_REPEATS} alternated runs; ${PRODUCERS} producers, ${formatRate(PUSHES)} pushes of 100 B each awaited, durability fsync, ${PART_BYTES / 1024} KiB parts; retention ${JSON.stringify(RETENTION)}\n`,
  );
  console.log(formatTable(["run", "p50", "p99 (min-max)", "pushes", "parts deleted"], [row("no retention", off), row("retention deleting parts", on)], true));
  const ratio = median(on.map((r) => r.p99)) / median(off.map((r) => r.p99));
  console.log(`\np99 with retention / without: ${ratio.toFixed(2)}x (target: at most 1.5x) ${ratio <= 1.5 ? "met" : "MISSED"}\n`);
}

// --- What the index costs a push ---

async function indexRun(indexInterval: number): Promise<number> {
  return inTempDir("life-index", async (dir) => {
    const q = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none", indexInterval, onProblem: quiet });
    const count = Math.round(1_000_000 * SCALE);
    const batch = Array.from({ length: 1000 }, () => BODY);
    const start = now();
    for (let i = 0; i < count; i += 1000) await q.pushBatch(batch);
    const seconds = now() - start;
    await q.close();
    return count / seconds;
  });
}

async function indexCost(): Promise<void> {
  progress("push throughput by index interval (alternated)");
  const intervals = [1_000_000_000, 1000, 100];
  const runs = new Map<number, number[]>(intervals.map((i) => [i, []]));
  await indexRun(1000); // warm-up
  for (let r = 0; r < REPEATS; r++) for (const i of intervals) runs.get(i)!.push(await indexRun(i));
  const base = median(runs.get(intervals[0]!)!);
  console.log(`${formatRate(1_000_000 * SCALE)} pushes of 100 B in batches of 1,000, durability none\n`);
  console.log(
    formatTable(
      ["indexInterval", "pushes/s", "vs. no index entries"],
      intervals.map((i) => [
        i === intervals[0] ? "1e9 (first record and end only)" : String(i),
        formatRate(median(runs.get(i)!)),
        `${(median(runs.get(i)!) / base).toFixed(2)}x`,
      ]),
      true,
    ),
  );
  console.log("");
}

// --- Seeks on a big queue and on a small one ---

const SEEKS = Number(process.env.VQ_BENCH_LIFE_SEEKS) || 200;
/**
 * The floor beside the seeks: a bare step of CPU work this long on an idle core and the one
 * write no seek can skip (a position line rewritten in place, not fsync'd), no engine.
 */
const FLOOR_STEP_MS = 0.1;
const POSITION_LINE = new TextEncoder().encode("q;c;12;34567890;1234567;1234567890\n");

async function seekCost(): Promise<void> {
  const big = Math.round(10_000_000 * SCALE);
  const rows: string[][] = [];
  for (const count of [10_000, big]) {
    progress(`seek on a queue of ${formatRate(count)} messages`);
    rows.push(
      await inTempDir("life-seek", async (dir) => {
        const driver = fsDriver({ dir });
        const build = now();
        const q = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: 64 * 1024 * 1024, onProblem: quiet });
        const batch = Array.from({ length: 10_000 }, () => "m-0123456789");
        const first = Date.now();
        const sizes = new Map<number, number>(); // part -> its last seq
        for (let i = 0; i < count; i += batch.length) for (const p of await q.pushBatch(batch)) sizes.set(p.part, p.seq);
        const last = Date.now();
        const parts = q.position.part + 1;
        await q.close();
        const buildSeconds = now() - build;
        (globalThis as { gc?: () => void }).gc?.(); // the build's garbage is not the seeks' to collect
        const c = await QueueConsumer.open("q", "c", { driver, syncCommits: false, onProblem: quiet });
        const timeSeek: number[] = [];
        const seqSeek: number[] = [];
        const floor: number[] = [];
        const stepWork = Math.round(FLOOR_STEP_MS * cpuWorkPerMs());
        const floorFile = openSync(`${dir}/floor`, "w");
        for (let i = 0; i < 20; i++) await c.seek({ time: first + Math.random() * (last - first) }); // warm-up, not measured
        for (let i = 0; i < SEEKS; i++) {
          let t = now();
          await c.seek({ time: first + Math.random() * (last - first) });
          timeSeek.push((now() - t) * 1000);
          const [part, lastSeq] = [...sizes][Math.floor(Math.random() * sizes.size)]!;
          t = now();
          await c.seek({ part, seq: 1 + Math.floor(Math.random() * lastSeq) });
          seqSeek.push((now() - t) * 1000);
          t = now();
          cpuWork(stepWork);
          writeSync(floorFile, POSITION_LINE, 0, POSITION_LINE.length, 0);
          await Promise.resolve();
          floor.push((now() - t) * 1000);
        }
        closeSync(floorFile);
        await c.close();
        const p = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.floor(values.length * q)]!.toFixed(2);
        return [
          formatRate(count),
          String(parts),
          `${buildSeconds.toFixed(1)} s`,
          `${p(timeSeek, 0.5)} / ${p(timeSeek, 0.99)} ms`,
          `${p(seqSeek, 0.5)} / ${p(seqSeek, 0.99)} ms`,
          `${p(floor, 0.5)} / ${p(floor, 0.99)} ms`,
        ];
      }),
    );
  }
  console.log(
    `${SEEKS} seeks of each kind to random targets (a consumer's seek, position saved without fsync); 13 B messages, 64 MiB parts, indexInterval 1000\n`,
  );
  console.log(
    formatTable(
      ["messages", "parts", "built in", "seek by time p50 / p99", "seek by seq p50 / p99", `floor: ${FLOOR_STEP_MS} ms of CPU + a write, p50 / p99`],
      rows,
      true,
    ),
  );
  console.log(
    `\ntarget: under 5 ms each, independent of the queue's size. The floor, timed between the seeks without the engine: ${FLOOR_STEP_MS} ms of CPU work (on an idle core) and a ${POSITION_LINE.length} B line written in place, as a seek saves its position: what the machine's load adds to any such step at p99\n`,
  );
}

let _workSink = 0;
/** Fixed CPU work: `n` rounds of integer arithmetic. */
function cpuWork(n: number): void {
  let x = 0;
  for (let i = 0; i < n; i++) x = (x + i * 2_654_435_761) % 1_000_003;
  _workSink += x;
}

/** Rounds of `cpuWork` per ms: the fastest of a few tries (the least disturbed by the load). */
function cpuWorkPerMs(): number {
  let best = 0;
  for (let i = 0; i < 20; i++) {
    const t = now();
    cpuWork(100_000);
    best = Math.max(best, 100_000 / ((now() - t) * 1000));
  }
  return best;
}
