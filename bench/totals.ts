/**
 * Issue 12's benchmark: what `lag()` and `inspectQueue` cost on queues of 2, 200 and 2,000
 * parts (fs driver), in the writer's process and in another process's view (a driver whose
 * `storageKey` differs, so it shares no in-process state with the writer: it reads what another
 * process would). "first" is the first call after `invalidateTotals` (it recovers the totals
 * by walking the parts), "steady" the calls after it. Medians, in milliseconds.
 *
 * Target: `lag()` under 5 ms on 2,000 parts, independent of the queue's size.
 */
import { QueueConsumer, QueueWriter, inspectQueue, invalidateTotals, type QueueDriver } from "v-queue";
import fsDriver from "v-queue/drivers/fs";
import { formatTable, inTempDir, median, progress } from "./util";

const PART_COUNTS = [2, 200, 2000];
const FIRST_REPEATS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 3);
const STEADY_CALLS = 50;
const TARGET_MS = 5;
/** Two 487-byte messages (512 bytes each with their header) fill a part of this size (the least allowed). */
const MAX_PART_BYTES = 1024;
const quiet = () => {};

export async function runTotalsBench(): Promise<void> {
  console.log(`\n## Totals (issue 12): lag() and inspectQueue on the fs driver, medians in ms (first: ${FIRST_REPEATS} runs, steady: ${STEADY_CALLS} calls)\n`);
  const rows: string[][] = [];
  for (const parts of PART_COUNTS) {
    progress(`queue of ${parts} parts`);
    await inTempDir("totals", async (dir) => {
      const driver = fsDriver({ dir });
      const writer = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: MAX_PART_BYTES, onProblem: quiet });
      try {
        await writer.pushBatch(Array.from({ length: 2 * parts - 1 }, (_, i) => `${String(i).padStart(8, "0")}-${"x".repeat(478)}`));
        if (writer.position.part !== parts - 1) throw new Error(`expected ${parts} parts, got ${writer.position.part + 1}`);
        // Another process's view: same files, its own in-process state.
        const other: QueueDriver = { ...fsDriver({ dir }), storageKey: `bench-other:${dir}` };
        for (const [where, view] of [
          ["writer's process", driver],
          ["another process", other],
        ] as const) {
          const consumer = await QueueConsumer.open("q", where === "another process" ? "far" : "near", { driver: view, start: "earliest", onProblem: quiet });
          try {
            await consumer.read({ max: 3 });
            await consumer.commit();
            const expected = 2 * parts - 1 - 3;
            const lag = () => consumer.lag().then((n) => check(n, expected));
            const inspect = () => inspectQueue(view, "q").then((s) => check(s!.messages, 2 * parts - 1));
            rows.push([`lag()`, String(parts), where, ...(await firstAndSteady(view, lag))]);
            rows.push([`inspectQueue`, String(parts), where, ...(await firstAndSteady(view, inspect))]);
          } finally {
            await consumer.close();
          }
        }
      } finally {
        await writer.close();
      }
    });
  }
  console.log(formatTable(["call", "parts", "where", "first (ms)", "steady (ms)", "steady target"], rows));
}

/** Median of the first call after the totals are forgotten, and of the calls after it. */
async function firstAndSteady(view: QueueDriver, call: () => Promise<void>): Promise<string[]> {
  const first: number[] = [];
  for (let i = 0; i < FIRST_REPEATS; i++) {
    invalidateTotals(view, "q");
    first.push(await timed(call));
  }
  const steady: number[] = [];
  for (let i = 0; i < STEADY_CALLS; i++) steady.push(await timed(call));
  const ms = median(steady);
  return [median(first).toFixed(2), ms.toFixed(3), `< ${TARGET_MS}: ${ms < TARGET_MS ? "PASS" : "FAIL"}`];
}

async function timed(call: () => Promise<void>): Promise<number> {
  const start = performance.now();
  await call();
  return performance.now() - start;
}

function check(got: number, want: number): void {
  if (got !== want) throw new Error(`totals bench: got ${got}, expected ${want}`);
}
