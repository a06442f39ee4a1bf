/**
 * Memory of a long shared-consumer run (issue 13): `total` messages of 100 B through one
 * in-process shared consumer (fs driver, default options) while a writer in the same process
 * produces them in batches of 1000, never more than BACKLOG ahead of the acks. Every
 * `total / 10` acks, after a full GC, it samples the process's RSS and heapUsed; the heap is
 * "flat" when its last sample is within max(2 MB, 10 %) of the first.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { openQueue, openSharedConsumer } from "v-queue";
import type { DrainSetup } from "./shared-baselines";
import { drainShared } from "./shared-drain";
import { formatRate, formatTable, progress, removeDir, tempDir } from "./util";

const BACKLOG = 20_000;
const MB = 1024 * 1024;

interface MemorySample {
  acked: number;
  rss: number;
  heapUsed: number;
}

/** `global.gc` without `--expose-gc` on the command line (the bench runner's node has none). */
function fullGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

export async function runSharedMemory(total: number, setup: DrainSetup): Promise<void> {
  console.log(
    `\n### Memory: ${total} messages through one in-process shared consumer, produced in batches of 1000 while consumed (at most ${BACKLOG} ahead), ${setup.concurrency} loops of poll max ${setup.batch} + ack each; after a full GC\n`,
  );
  const gc = fullGc();
  const dir = tempDir("shared-memory");
  const samples: MemorySample[] = [];
  const sample = (acked: number) => {
    gc();
    const { rss, heapUsed } = process.memoryUsage();
    samples.push({ acked, rss, heapUsed });
  };
  const every = Math.max(1, Math.round(total / 10));
  try {
    const writer = await openQueue("mem", { dir });
    const consumer = await openSharedConsumer("mem", "m", { dir });
    let acked = 0;
    let wake: (() => void) | undefined;
    const batch = Array.from({ length: 1000 }, () => setup.payload);
    const produce = async () => {
      for (let produced = 0; produced < total; produced += 1000) {
        while (produced - acked >= BACKLOG) await new Promise<void>((resolve) => (wake = resolve));
        await writer.pushBatch(batch.slice(0, Math.min(1000, total - produced)));
      }
    };
    sample(0);
    progress(`memory run: ${total} messages ...`);
    const producing = produce();
    const seconds = await drainShared(consumer, total, setup.concurrency, setup.batch, (n) => {
      acked = n;
      if (wake) {
        const resume = wake;
        wake = undefined;
        resume();
      }
      if (n % every === 0) sample(n);
    });
    await producing;
    await consumer.close();
    await writer.close();
    printMemory(samples, total / seconds);
  } finally {
    removeDir(dir);
  }
}

function printMemory(samples: MemorySample[], rate: number): void {
  const mb = (bytes: number) => `${(bytes / MB).toFixed(1)} MB`;
  // The first sample after the run warmed up (the one at 0 is before any message).
  const first = samples[1] ?? samples[0]!;
  const last = samples.at(-1)!;
  const maxHeap = Math.max(...samples.map((s) => s.heapUsed));
  const maxRss = Math.max(...samples.map((s) => s.rss));
  const growth = last.heapUsed - first.heapUsed;
  const flat = growth <= Math.max(2 * MB, first.heapUsed * 0.1);
  console.log(
    formatTable(
      ["measure", "at 0", `first (${first.acked})`, `last (${last.acked})`, "max", "last - first", "result"],
      [
        ["heapUsed after GC", mb(samples[0]!.heapUsed), mb(first.heapUsed), mb(last.heapUsed), mb(maxHeap), mb(growth), flat ? "PASS (flat)" : "FAIL (grows)"],
        ["RSS", mb(samples[0]!.rss), mb(first.rss), mb(last.rss), mb(maxRss), mb(last.rss - first.rss), "informative"],
      ],
    ),
  );
  console.log(`\nheapUsed per sample (MB): ${samples.map((s) => (s.heapUsed / MB).toFixed(1)).join(", ")}`);
  console.log(`RSS per sample (MB): ${samples.map((s) => (s.rss / MB).toFixed(0)).join(", ")}`);
  console.log(`Rate of this run (produce and consume in one process): ${formatRate(rate)} msgs/s.`);
}
