/**
 * A/B of the engine rows of issue 41 between builds, for a loaded machine: each round runs the
 * bare-fs baseline, then every build, in turn; a figure is the median over rounds of
 * (build's rate / baseline's rate), by wall time and by the process's CPU time (user + system,
 * all threads: the thread pool's reads and writes included). Wall ratios swing with the other
 * processes on the machine; CPU-time ratios barely do, so they show a change that wall time hides.
 *
 *   node bench/ab-engine.mjs <dist> [<dist> ...]    e.g. `cp -r dist .tmp/before`, change, build, then
 *   node bench/ab-engine.mjs .tmp/before dist
 *
 * A build directory must sit inside the repository (its imports resolve from node_modules).
 * VQ_AB_ROWS=consume,batch,all picks rows, VQ_AB_ROUNDS (default 5) the measured rounds (one
 * more, first, warms up and is dropped), VQ_AB_SCALE (default 1) the message counts. The consume
 * and 1000-push rows also show their limit: a bare loop that keeps the engine's promise (bodies that
 * stay valid; a promise per message), by the same ratio to the same bare baseline.
 */
import console from "node:console";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import process from "node:process";
import { pathToFileURL } from "node:url";
import { baselineAppend, baselineAppendPromised, baselineRead } from "./baseline.mjs";

const ROUNDS = Math.max(1, Number(process.env.VQ_AB_ROUNDS) || 5);
const SCALE = Math.max(0.01, Number(process.env.VQ_AB_SCALE) || 1);
const ROWS = (process.env.VQ_AB_ROWS || "consume,batch,all").split(",");
const LARGE = Math.round((20_000 * SCALE) / 1000) * 1000 || 1000;
const SMALL = Math.round((200_000 * SCALE) / 1000) * 1000 || 1000;
const BATCH = 1000;
const quiet = () => {};

/** 4 KiB byte messages sharing 10 contents, and 100-byte JSON-ish texts, as bench/engine.ts makes them. */
const bytesPool = Array.from({ length: BATCH }, (_, i) => Uint8Array.from({ length: 4096 }, (_, j) => (j * 31 + (i % 10)) & 0xff));
const textPool = Array.from({ length: BATCH }, (_, i) => {
  const head = `{"id":${i},"kind":"event","payload":"`;
  return `${head}${"x".repeat(100 - head.length - 2)}"}`;
});

const builds = await Promise.all(
  process.argv.slice(2).map(async (dir) => {
    const url = (file) => pathToFileURL(resolve(dir, file)).href;
    return { dir, engine: await import(url("node.mjs")), fsDriver: (await import(url("drivers/fs.mjs"))).default };
  }),
);
if (builds.length === 0) {
  console.error("Usage: node bench/ab-engine.mjs <dist> [<dist> ...]");
  process.exit(2);
}

/** [wall seconds, CPU seconds] of `body`. */
async function measure(body) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  const count = await body();
  const used = process.cpuUsage(cpu);
  return { count, wall: (performance.now() - start) / 1000, cpu: (used.user + used.system) / 1e6 };
}

async function inTempDir(body) {
  const dir = mkdtempSync(join(tmpdir(), "vq-ab-"));
  try {
    return await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Engine consume of 4 KiB messages pushed with fsync, `read({ max: 1000 })` to the end, one commit. */
async function consume({ engine, fsDriver }, dir) {
  const writer = await engine.QueueWriter.open("ab", { driver: fsDriver({ dir }), durability: "fsync", onProblem: quiet });
  for (let sent = 0; sent < LARGE; sent += BATCH) await writer.pushBatch(bytesPool);
  await writer.close();
  const consumer = await engine.QueueConsumer.open("ab", "c", { driver: fsDriver({ dir }), start: "earliest", onProblem: quiet });
  const figure = await measure(async () => {
    let read = 0;
    for (let batch; (batch = await consumer.read({ max: BATCH })).length > 0;) read += batch.length;
    await consumer.commit();
    return read;
  });
  await consumer.close();
  return figure;
}

/** Engine push of 100-byte texts, as `pushBatch(1000)` or 1000 `push()` awaited together. */
async function push({ engine, fsDriver }, dir, durability, how) {
  const writer = await engine.QueueWriter.open("ab", { driver: fsDriver({ dir }), durability, onProblem: quiet });
  const figure = await measure(async () => {
    for (let sent = 0; sent < SMALL; sent += BATCH) {
      if (how === "batch") await writer.pushBatch(textPool);
      else await Promise.all(textPool.map((m) => writer.push(m)));
    }
    return SMALL;
  });
  await writer.close();
  return figure;
}

const rows = {
  consume: {
    label: `consume ${LARGE} x 4 KiB after fsync vs bare read`,
    base: (dir) => (baselineAppend(join(dir, "q"), bytesPool, LARGE), measure(() => baselineRead(join(dir, "q"), LARGE).messages)),
    run: consume,
    limit: {
      label: "bare read, a new buffer per chunk (bodies stay valid, as the engine's)",
      run: (dir) => (baselineAppend(join(dir, "q"), bytesPool, LARGE), measure(() => baselineRead(join(dir, "q"), LARGE, true).messages)),
    },
  },
  batch: {
    label: `push interval pushBatch(1000) ${SMALL} x 100 B vs bare append`,
    base: appendBase,
    run: (build, dir) => push(build, dir, "interval", "batch"),
  },
  all: {
    label: `push none 1000 x push() together ${SMALL} x 100 B vs bare append`,
    base: appendBase,
    run: (build, dir) => push(build, dir, "none", "all"),
    limit: {
      label: "bare append, a promise per message, 1000 awaited together",
      run: (dir) => measure(async () => (await baselineAppendPromised(join(dir, "q"), textPool, SMALL)).messages),
    },
  },
};

function appendBase(dir) {
  return measure(() => baselineAppend(join(dir, "q"), textPool, SMALL).messages);
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
const show = (values) => `${median(values).toFixed(2)}x (${values.map((v) => v.toFixed(2)).join(" ")})`;

console.log(`engine A/B, Node ${process.version}, ${new Date().toISOString()}, median of ${ROUNDS} rounds`);
for (const name of ROWS) {
  const row = rows[name];
  if (!row) throw new Error(`Unknown row ${name}: use consume, batch or all.`);
  const ratios = builds.map(() => ({ wall: [], cpu: [] }));
  const limit = { wall: [], cpu: [] };
  for (let round = 0; round <= ROUNDS; round++) {
    for (const [k, build] of builds.entries()) {
      const base = await inTempDir(row.base);
      const got = await inTempDir((dir) => row.run(build, dir));
      if (got.count !== base.count) throw new Error(`${name}: ${got.count} messages, the baseline ${base.count}`);
      if (round === 0) continue; // warm-up
      ratios[k].wall.push(base.wall / got.wall);
      ratios[k].cpu.push(base.cpu / got.cpu);
    }
    if (!row.limit) continue;
    // What a bare loop that keeps the engine's promise gets, against the same bare baseline.
    const base = await inTempDir(row.base);
    const bound = await inTempDir(row.limit.run);
    if (round === 0) continue;
    limit.wall.push(base.wall / bound.wall);
    limit.cpu.push(base.cpu / bound.cpu);
  }
  console.log(`\n${row.label}`);
  for (const [k, build] of builds.entries()) console.log(`  ${build.dir}: CPU time ${show(ratios[k].cpu)}, wall ${show(ratios[k].wall)}`);
  if (row.limit) console.log(`  limit, ${row.limit.label}: CPU time ${show(limit.cpu)}, wall ${show(limit.wall)}`);
}
