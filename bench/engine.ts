/**
 * The engine benchmark of issue 2: push and consume throughput of v-queue on the fs driver,
 * for each durability mode, beside a plain-`fs` baseline measured in the same run, plus the
 * 16-producer fsync-vs-none comparison. Prints one table; returns its rows for other tools.
 *
 * Sizes can be scaled down for a quick look with VQ_BENCH_SCALE=0.1 (targets are then only
 * indicative) and repeats changed with VQ_BENCH_REPEATS (default 3; figures are medians).
 */
import { closeSync, fdatasyncSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
// The built package, as users run it (`npm run bench` builds first): measuring the sources
// through a TypeScript loader would add the loader's own cost to every hot call.
import { QueueConsumer, QueueWriter, type Durability } from "v-queue";
import fsDriver from "v-queue/drivers/fs";
import { baselineAppend, baselineAppendPromised, baselineRead } from "./baseline.mjs";
import { formatRate, formatTable, inTempDir, median, now, progress, rateOf, removeDir, repeat, tempDir, type Rate, type Sample } from "./util";

type Payload = string | Uint8Array;

export interface BenchRow {
  scenario: string;
  rate: Rate;
  /** The rate this row is judged against (a baseline, or the no-fsync run). */
  reference?: { label: string; msgsPerSec: number };
  /** Lowest acceptable rate / reference; undefined for rows that are only informative. */
  target?: number;
}

const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const SCALE = Math.min(1, Math.max(0.001, Number(process.env.VQ_BENCH_SCALE) || 1));
const SMALL = { count: Math.round(1_000_000 * SCALE), size: 100 };
const LARGE = { count: Math.round(100_000 * SCALE), size: 4096 };
const BATCH = 1000;
const PRODUCERS = 16;
const PRODUCER_SECONDS = 1.5;
const MODES: Durability[] = ["fsync", "interval", "none"];
const PUSH_TARGET = 0.7;
const READ_TARGET = 0.7;
const FSYNC_TARGET = 0.5;
const quiet = () => {};

export async function runEngineBench(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  console.log(`\n## Engine (fs driver), median of ${REPEATS} runs${SCALE < 1 ? `, scale ${SCALE}` : ""}\n`);
  const latency = measureFdatasync();
  console.log(`fdatasync latency in os.tmpdir(): median ${latency.toFixed(2)} ms (100 B pwrite + fdatasync)\n`);

  const sets = [
    { ...SMALL, pool: textPool(SMALL.size), kind: "str" },
    { ...LARGE, pool: bytesPool(LARGE.size), kind: "bytes" },
  ];
  progress("warm-up (not measured)");
  for (const { count, pool } of sets) await warmUp(pool, Math.ceil(count / 20));

  for (const { count, size, pool, kind } of sets) {
    const label = `${formatRate(count)} x ${size < 1024 ? `${size} B` : `${size / 1024} KiB`} ${kind}`;
    progress(`baseline ${label}`);
    const append = await repeat(REPEATS, () => inTempDir("base", async (dir) => baselineAppend(join(dir, "q"), pool, count)));
    const readBack = await repeat(REPEATS, () =>
      inTempDir("base", async (dir) => {
        baselineAppend(join(dir, "q"), pool, count);
        return baselineRead(join(dir, "q"), count);
      }),
    );
    // The limits of the engine's promises, measured the same way: a promise per push, and read bodies that stay valid.
    const appendPromised = await repeat(REPEATS, () => inTempDir("base", (dir) => baselineAppendPromised(join(dir, "q"), pool, count)));
    const readFresh = await repeat(REPEATS, () =>
      inTempDir("base", async (dir) => {
        baselineAppend(join(dir, "q"), pool, count);
        return baselineRead(join(dir, "q"), count, true);
      }),
    );
    rows.push({ scenario: `baseline fs append ${label}`, rate: append });
    rows.push({ scenario: `baseline fs read+crc ${label}`, rate: readBack });
    const appendRef = { label: "fs append", msgsPerSec: append.msgsPerSec };
    const readRef = { label: "fs read", msgsPerSec: readBack.msgsPerSec };
    rows.push({ scenario: `baseline fs append, a promise per message, ${BATCH} awaited together ${label}`, rate: appendPromised, reference: appendRef });
    rows.push({ scenario: `baseline fs read+crc, a new buffer per chunk (bodies stay valid) ${label}`, rate: readFresh, reference: readRef });

    for (const durability of MODES) {
      // fsync rows are judged by the 16-producer ratio below, not against an un-synced baseline.
      const target = durability === "fsync" ? undefined : PUSH_TARGET;
      progress(`${durability}: pushBatch(${BATCH}) + consume ${label}`);
      const consumed: Sample[] = [];
      const batched = await repeat(REPEATS, () =>
        inTempDir("vq", async (dir) => {
          const pushed = await pushRun(dir, durability, pool, count, "batch");
          consumed.push(await consumeRun(dir, count, pool));
          return pushed;
        }),
      );
      progress(`${durability}: ${BATCH} x push() via Promise.all ${label}`);
      const together = await repeat(REPEATS, () => inTempDir("vq", (dir) => pushRun(dir, durability, pool, count, "all")));
      rows.push({ scenario: `push ${durability} pushBatch(${BATCH}) ${label}`, rate: batched, reference: appendRef, target });
      rows.push({ scenario: `push ${durability} Promise.all(${BATCH} push) ${label}`, rate: together, reference: appendRef, target });
      rows.push({ scenario: `consume read(max ${BATCH}) after ${durability} ${label}`, rate: rateOf(consumed), reference: readRef, target: READ_TARGET });
    }
  }

  const message = textPool(SMALL.size)[0]!;
  for (const batch of [1, 100]) {
    const how = batch === 1 ? "await push()" : `await pushBatch(${batch})`;
    progress(`${PRODUCERS} producers, ${how}, fsync vs none`);
    const none = await repeat(REPEATS, () => inTempDir("vq", (dir) => producersRun(dir, "none", message, batch)));
    const fsync = await repeat(REPEATS, () => inTempDir("vq", (dir) => producersRun(dir, "fsync", message, batch)));
    const label = `${PRODUCERS} producers ${how} 100 B`;
    rows.push({ scenario: `${label}, none`, rate: none });
    rows.push({ scenario: `${label}, fsync`, rate: fsync, reference: { label: "none", msgsPerSec: none.msgsPerSec }, target: FSYNC_TARGET });
  }

  console.log(renderRows(rows));
  return rows;
}

/** The result table, as text (or Markdown for BENCHMARKS.md). */
export function renderRows(rows: BenchRow[], markdown = false): string {
  const body = rows.map((row) => {
    const ratio = row.reference ? row.rate.msgsPerSec / row.reference.msgsPerSec : undefined;
    const spread = `${formatRate(Math.min(...row.rate.runs))}-${formatRate(Math.max(...row.rate.runs))}`;
    return [
      row.scenario,
      formatRate(row.rate.msgsPerSec),
      row.rate.mbPerSec.toFixed(1),
      spread,
      ratio === undefined ? "-" : `${ratio.toFixed(2)} x ${row.reference!.label}`,
      row.target === undefined ? "-" : `>= ${row.target.toFixed(2)}`,
      row.target === undefined || ratio === undefined ? "" : ratio >= row.target ? "PASS" : "FAIL",
    ];
  });
  return formatTable(["scenario", "msgs/s", "MB/s", "runs (min-max)", "ratio", "target", "result"], body, markdown);
}

// --- v-queue runs ---

/** Pushes `count` messages, in `pushBatch(1000)` calls or as 1000 `push()` calls awaited together. */
async function pushRun(dir: string, durability: Durability, pool: Payload[], count: number, how: "batch" | "all"): Promise<Sample> {
  const queue = await QueueWriter.open("bench", { driver: fsDriver({ dir }), durability, onProblem: quiet });
  let bytes = 0;
  const start = now();
  for (let sent = 0; sent < count; sent += BATCH) {
    const n = Math.min(BATCH, count - sent);
    const batch = pool.length === n ? pool : pickBatch(pool, sent, n);
    if (how === "batch") await queue.pushBatch(batch);
    else await Promise.all(batch.map((m) => queue.push(m)));
    bytes += payloadBytes(batch);
  }
  // Timed up to the last acknowledgement; close (and interval's final fsync) is not.
  const seconds = now() - start;
  await queue.close();
  return { messages: count, bytes, seconds };
}

/** Reads everything from the start with `read({ max: 1000 })`, one commit at the end. */
async function consumeRun(dir: string, count: number, pool: Payload[]): Promise<Sample> {
  const consumer = await QueueConsumer.open("bench", "c", { driver: fsDriver({ dir }), start: "earliest", onProblem: quiet });
  let messages = 0;
  let bytes = 0;
  const start = now();
  for (;;) {
    const batch = await consumer.read({ max: BATCH });
    if (batch.length === 0) break;
    if (messages === 0) checkFirst(batch[0]!.data, pool[0]!);
    messages += batch.length;
    for (const m of batch) bytes += m.size;
  }
  await consumer.commit();
  const seconds = now() - start;
  await consumer.close();
  if (messages !== count) throw new Error(`consume: read ${messages} messages, expected ${count}`);
  return { messages, bytes, seconds };
}

/** `PRODUCERS` loops on one writer, each awaiting its own push (or pushBatch) before the next. */
async function producersRun(dir: string, durability: Durability, message: string, batch: number): Promise<Sample> {
  const queue = await QueueWriter.open("bench", { driver: fsDriver({ dir }), durability, onProblem: quiet });
  const messages = Array.from({ length: batch }, () => message);
  let sent = 0;
  const start = now();
  const deadline = start + PRODUCER_SECONDS;
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (now() < deadline) {
        if (batch === 1) await queue.push(message);
        else await queue.pushBatch(messages);
        sent += batch;
      }
    }),
  );
  const seconds = now() - start;
  await queue.close();
  return { messages: sent, bytes: sent * message.length, seconds };
}

/** One small unmeasured pass over every code path, so the first measured run is not the JIT's. */
async function warmUp(pool: Payload[], count: number): Promise<void> {
  await inTempDir("warm", async (dir) => {
    baselineAppend(join(dir, "base"), pool, count);
    baselineRead(join(dir, "base"), count);
    await pushRun(dir, "none", pool, count, "batch");
    await consumeRun(dir, count, pool);
  });
  await inTempDir("warm", (dir) => pushRun(dir, "none", pool, count, "all"));
}

// --- Helpers ---

/** 1000 distinct ASCII JSON-ish strings of exactly `size` bytes (a realistic small message). */
function textPool(size: number): string[] {
  return Array.from({ length: BATCH }, (_, i) => {
    const head = `{"id":${i},"kind":"event","payload":"`;
    return `${head}${"x".repeat(Math.max(0, size - head.length - 2))}"}`.slice(0, size);
  });
}

/** 1000 byte messages of `size`, sharing 10 distinct contents (saves memory, not work). */
function bytesPool(size: number): Uint8Array[] {
  const distinct = Array.from({ length: 10 }, (_, k) => Uint8Array.from({ length: size }, (_, j) => (j * 31 + k) & 0xff));
  return Array.from({ length: BATCH }, (_, i) => distinct[i % distinct.length]!);
}

function pickBatch(pool: Payload[], from: number, n: number): Payload[] {
  return Array.from({ length: n }, (_, i) => pool[(from + i) % pool.length]!);
}

function payloadBytes(batch: Payload[]): number {
  let n = 0;
  for (const m of batch) n += m.length; // ASCII strings: length is the byte count
  return n;
}

function checkFirst(got: Payload, want: Payload): void {
  const same = typeof want === "string" ? got === want : got instanceof Uint8Array && Buffer.compare(got, want) === 0;
  if (!same) throw new Error("consume: the first message read back differs from the first pushed");
}

/** Median latency, in ms, of a 100-byte positional write followed by fdatasync, in the temp dir. */
function measureFdatasync(rounds = 100): number {
  const dir = tempDir("probe");
  try {
    const fd = openSync(join(dir, "probe"), "w");
    const block = Buffer.alloc(100, 1);
    const times: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const t = now();
      writeSync(fd, block, 0, block.length, i * block.length);
      fdatasyncSync(fd);
      times.push((now() - t) * 1000);
    }
    closeSync(fd);
    return median(times);
  } finally {
    removeDir(dir);
  }
}
