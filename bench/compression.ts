/**
 * The compression bench of issue 12, on a generated corpus of JSON log lines (200 B-2 KiB,
 * bench/corpus.ts):
 * - ratio: bodies as pushed over bodies as stored by `compression: "zstd"`, beside the zstd
 *   CLI (`/usr/bin/zstd`, the ceiling) compressing each line alone at -3 with a dictionary
 *   that `zstd --train` made from the whole corpus (and, for context, the corpus as one file);
 * - push and consume throughput with compression, with each zstd (wasm: zstd-codec, native:
 *   zstd-napi), beside the same without, alternately in one run (durability "none", so the
 *   comparison is of CPU, not of fsync);
 * - consume of a crate-like part: bodies compressed with the CLI's trained dictionary (as a
 *   crate 0.3.x writer with a trained dictionary would store them), read by each zstd.
 * VQ_BENCH_REPEATS (default 3) and VQ_BENCH_SCALE (default 1 = 40,000 lines) as elsewhere.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { QueueConsumer, QueueWriter, type QueueOptions } from "v-queue";
import fsDriver from "v-queue/drivers/fs";
import { nativeZstd, selectZstd } from "v-queue/zstd-native";
import { logCorpus } from "./corpus";
import { formatRate, formatTable, inTempDir, now, progress, rateOf, removeDir, tempDir, type Sample } from "./util";

const REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const SCALE = Math.min(1, Math.max(0.01, Number(process.env.VQ_BENCH_SCALE) || 1));
const COUNT = Math.round(40_000 * SCALE);
const BATCH = 1000;
const ZSTD_CLI = "/usr/bin/zstd";
const RATIO_TARGET = 0.9;
const SPEED_TARGET = 0.5;
const quiet = () => {};

export async function runCompressionBench(): Promise<void> {
  console.log(`\n## Compression (fs driver, ${formatRate(COUNT)} JSON log lines, median of ${REPEATS} runs)\n`);
  const lines = logCorpus(COUNT);
  const bodyBytes = lines.reduce((sum, l) => sum + Buffer.byteLength(l), 0);
  console.log(
    `corpus: ${lines.length} lines, ${(bodyBytes / 1e6).toFixed(1)} MB, ${Math.min(...lines.map((l) => l.length))}-${Math.max(...lines.map((l) => l.length))} B\n`,
  );

  progress("ratio");
  const stored = await inTempDir("zstd", (dir) => storedBytes(dir, lines, { compression: "zstd", zstd: selectZstd("wasm") }));
  const ours = bodyBytes / stored;
  const nativeStored = await nativeZstd().then(
    () => inTempDir("zstd-native", (dir) => storedBytes(dir, lines, { compression: "zstd", zstd: nativeZstd })),
    () => undefined,
  );
  const cli = existsSync(ZSTD_CLI) ? await inTempDir("cli", async (dir) => cliRatios(dir, lines, bodyBytes)) : undefined;
  const row = (name: string, ratio: number) => [
    name,
    ratio.toFixed(2),
    cli ? `${(ratio / cli.perMessage).toFixed(2)} x CLI` : "-",
    `>= ${RATIO_TARGET}`,
    cli ? (ratio / cli.perMessage >= RATIO_TARGET ? "PASS" : "FAIL") : "-",
  ];
  const ratioRows = [row("v-queue zstd (level 3, per-part raw-content dictionary built from its first 128 KiB, u32 length per body), wasm", ours)];
  if (nativeStored) ratioRows.push(row("the same, native (zstd-napi)", bodyBytes / nativeStored));
  if (cli) {
    progress("ratio, supplied dictionary");
    const supplied = bodyBytes / (await inTempDir("zstd-dict", (dir) => storedBytes(dir, lines, { compression: "zstd", compressionDictionary: cli.dict })));
    ratioRows.push(row("v-queue zstd with compressionDictionary = the CLI's trained dictionary", supplied));
  }
  if (cli) {
    ratioRows.push(["zstd CLI -3 -D (trained on the corpus), each line alone", cli.perMessage.toFixed(2), "1.00 x CLI", "", ""]);
    ratioRows.push(["zstd CLI -3 -D --no-check --no-dictID, each line alone", cli.bare.toFixed(2), `${(ours / cli.bare).toFixed(2)} of this`, "", ""]);
    ratioRows.push(["zstd CLI -3, the corpus as one file (context)", cli.whole.toFixed(2), "-", "", ""]);
  } else console.log(`(${ZSTD_CLI} not found: no CLI ceiling)`);
  console.log(formatTable(["bodies", "ratio", "vs", "target", "result"], ratioRows));

  progress("throughput");
  const native = await nativeZstd().then(
    () => true,
    (error: unknown) => (console.log(`(${(error as Error).message.split(". ")[0]}: no native rows)`), false),
  );
  const modes = native ? (["none", "wasm", "native"] as const) : (["none", "wasm"] as const);
  type Mode = (typeof modes)[number];
  const optionsOf = (mode: Mode): QueueOptions => (mode === "none" ? { compression: "none" } : { compression: "zstd", zstd: selectZstd(mode) });
  const rows: string[][] = [];
  const samples = { push: {} as Record<Mode, Sample[]>, consume: {} as Record<Mode, Sample[]>, crate: {} as Record<Mode, Sample[]> };
  for (const mode of modes) for (const what of ["push", "consume", "crate"] as const) samples[what][mode] = [];
  // A crate-like part: every body compressed from the first with a trained dictionary (no raw learning phase).
  const crateDir = cli ? tempDir("crate") : undefined;
  if (crateDir && cli) await pushAll(crateDir, lines, { compression: "zstd", compressionDictionary: cli.dict, zstd: selectZstd(native ? "native" : "wasm") });
  for (let run = 0; run < REPEATS; run++) {
    // Alternate the modes, in another order each run (the VM is noisy).
    for (const mode of run % 2 ? [...modes].reverse() : modes) {
      await inTempDir(`tp-${mode}`, async (dir) => {
        samples.push[mode].push(await pushAll(dir, lines, optionsOf(mode)));
        samples.consume[mode].push(await consumeAll(dir, bodyBytes, optionsOf(mode)));
      });
      if (crateDir && mode !== "none") samples.crate[mode].push(await consumeAll(crateDir, bodyBytes, optionsOf(mode), `${mode}-${run}`));
    }
  }
  for (const what of ["push", "consume"] as const) {
    const plain = rateOf(samples[what].none);
    rows.push([
      `${what} pushBatch/read(${BATCH}), compression "none"`,
      formatRate(plain.msgsPerSec),
      plain.mbPerSec.toFixed(0),
      spread(plain.runs),
      "-",
      "-",
      "",
    ]);
    for (const mode of modes.filter((m) => m !== "none")) {
      const zstd = rateOf(samples[what][mode]);
      const ratio = zstd.msgsPerSec / plain.msgsPerSec;
      rows.push([
        `${what} pushBatch/read(${BATCH}), compression "zstd", ${mode}`,
        formatRate(zstd.msgsPerSec),
        zstd.mbPerSec.toFixed(0),
        spread(zstd.runs),
        `${ratio.toFixed(2)} x none`,
        `>= ${SPEED_TARGET}`,
        ratio >= SPEED_TARGET ? "PASS" : "FAIL",
      ]);
    }
  }
  if (crateDir) {
    const plain = rateOf(samples.consume.none);
    for (const mode of modes.filter((m) => m !== "none")) {
      const zstd = rateOf(samples.crate[mode]);
      const ratio = zstd.msgsPerSec / plain.msgsPerSec;
      rows.push([
        `consume read(${BATCH}) of a crate-like part (trained dictionary, all compressed), ${mode}`,
        formatRate(zstd.msgsPerSec),
        zstd.mbPerSec.toFixed(0),
        spread(zstd.runs),
        `${ratio.toFixed(2)} x none`,
        `>= ${SPEED_TARGET}`,
        ratio >= SPEED_TARGET ? "PASS" : "FAIL",
      ]);
    }
    removeDir(crateDir);
  }
  console.log(`\n${formatTable(["scenario (durability none)", "msgs/s", "MB/s", "runs (min-max)", "ratio", "target", "result"], rows)}`);
}

/** Bodies' bytes as stored after pushing `lines` with `options`. */
async function storedBytes(dir: string, lines: string[], options: QueueOptions): Promise<number> {
  await pushAll(dir, lines, options);
  let total = 0;
  const consumer = await QueueConsumer.open("bench", "c", { driver: fsDriver({ dir }), onProblem: quiet });
  for (let batch = await consumer.read({ max: BATCH }); batch.length > 0; batch = await consumer.read({ max: BATCH }))
    for (const m of batch) total += m.stored ?? m.size;
  await consumer.close();
  return total;
}

const spread = (runs: number[]) => `${formatRate(Math.min(...runs))}-${formatRate(Math.max(...runs))}`;

async function pushAll(dir: string, lines: string[], options: QueueOptions): Promise<Sample> {
  const writer = await QueueWriter.open("bench", { driver: fsDriver({ dir }), durability: "none", onProblem: quiet, ...options });
  const start = now();
  for (let i = 0; i < lines.length; i += BATCH) await writer.pushBatch(lines.slice(i, i + BATCH));
  await writer.close();
  return { messages: lines.length, bytes: lines.reduce((sum, l) => sum + l.length, 0), seconds: now() - start };
}

async function consumeAll(dir: string, bodyBytes: number, options: QueueOptions = {}, name = "c"): Promise<Sample> {
  const consumer = await QueueConsumer.open("bench", name, { driver: fsDriver({ dir }), onProblem: quiet, zstd: options.zstd });
  const start = now();
  let messages = 0;
  for (let batch = await consumer.read({ max: BATCH }); batch.length > 0; batch = await consumer.read({ max: BATCH })) messages += batch.length;
  await consumer.commit();
  const seconds = now() - start;
  await consumer.close();
  return { messages, bytes: bodyBytes, seconds };
}

/** The CLI's ratios: each line alone with a dictionary trained on the corpus, and the corpus as one file. */
function cliRatios(dir: string, lines: string[], bodyBytes: number): { perMessage: number; bare: number; whole: number; dict: Uint8Array } {
  const src = join(dir, "m");
  mkdirSync(src);
  lines.forEach((line, i) => writeFileSync(join(src, `${String(i).padStart(6, "0")}.json`), line));
  const files = readdirSync(src).map((f) => join(src, f));
  const dict = join(dir, "dict");
  execFileSync(ZSTD_CLI, ["-q", "--train", "--maxdict=16384", "-o", dict, ...files], { maxBuffer: 1 << 26 });
  const sizeOf = (out: string, ...flags: string[]) => {
    mkdirSync(out);
    // Many files per call: one process for all of them.
    for (let i = 0; i < files.length; i += 5000)
      execFileSync(ZSTD_CLI, ["-q", "-3", ...flags, "-D", dict, "--output-dir-flat", out, ...files.slice(i, i + 5000)]);
    return readdirSync(out).reduce((sum, f) => sum + statSync(join(out, f)).size, 0);
  };
  const all = join(dir, "all.jsonl");
  writeFileSync(all, lines.join("\n"));
  const whole = execFileSync(ZSTD_CLI, ["-q", "-3", "-c", all], { maxBuffer: 1 << 28 }).length;
  return {
    perMessage: bodyBytes / sizeOf(join(dir, "z")),
    bare: bodyBytes / sizeOf(join(dir, "zb"), "--no-check", "--no-dictID"),
    whole: bodyBytes / whole,
    dict: new Uint8Array(readFileSync(dict)),
  };
}
