/**
 * Schedules across instances: three `v-queue serve` processes (the built CLI) on ONE directory with
 * leased locks, a schedule every second, while one instance after another is SIGKILLed and
 * restarted or SIGSTOPped for twice the lease. Every firing is in the queue once (no tick twice),
 * each on the schedule's grid, and the gaps are only the take-overs: a holder killed or paused
 * past its lease leaves the ticks until another instance takes the writer (its lease, then one
 * keeper round), which fires the latest missed tick once and goes on. A partitioned queue's
 * schedule runs beside it in the same run: kept by partition 0's writer, each firing in one of the
 * partitions, checked the same way over all of them. ~30 s (CI: every instance killed once and
 * paused once); `VQ_LONG=1` goes on for 60 s. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { browseMessages } from "../../src/inspect/browse";
import { chaosLoop, expectEveryInstanceKilledAndPaused, startInstance, type ServeInstance } from "../helpers/multi-instance";
import { sleep } from "../helpers/sleep";

const LEASE_MS = 2000;
const EVERY_MS = 1000;
const RUN_MS = process.env.VQ_LONG === "1" ? 60_000 : 0;
/** The longest gap between two firings: a pause of twice the lease, the lease run out, a keeper round (1 s) and the writer's open, on a loaded machine. */
const MAX_GAP_MS = 2 * LEASE_MS + 3000;
/** The partitioned queue's partitions. */
const PARTITIONS = 3;

const root = mkdtempSync(join(tmpdir(), "vq-sched-chaos-"));
const instances: ServeInstance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
});

/** The ticks of the schedule's firings in `queue`, in queue order (each message is `{ schedule, tick, at }`). */
async function readTicks(driver: QueueDriver, queue = "beats"): Promise<number[]> {
  const ticks: number[] = [];
  for (let from: string | null | undefined = "earliest"; from;) {
    const page = await browseMessages(driver, queue, { from, limit: 1000, onProblem: () => {} });
    for (const m of page.messages) ticks.push((JSON.parse(String(m.data)) as { tick: number }).tick);
    from = page.next;
  }
  return ticks;
}

/** The ticks of the partitioned queue's firings, over its partitions, in tick order (no order holds across partitions). */
async function readPartitionedTicks(driver: QueueDriver): Promise<number[]> {
  const ticks: number[] = [];
  for (let p = 0; p < PARTITIONS; p++) ticks.push(...(await readTicks(driver, `pbeats.p${p}`)));
  return ticks.sort((a, b) => a - b);
}

const setSchedule = async (url: string, queue: string): Promise<number> => {
  const res = await fetch(`${url}/api/v1/queues/${queue}/schedules/beat`, {
    method: "PUT",
    body: JSON.stringify({ everyMs: EVERY_MS }),
    headers: { "content-type": "application/json" },
  });
  expect(res.status, queue).toBe(201);
  return ((await res.json()) as { schedule: { sinceMs: number } }).schedule.sinceMs;
};

/** None twice, in tick order (one writer at a time), each on the grid; gaps only while the writer changed hands; the last ticks each second. */
function expectFiredOnce(name: string, ticks: number[], sinceMs: number, readAt: number): void {
  const gaps = ticks.slice(1).map((tick, i) => tick - ticks[i]!);
  const summary = `${name}: ${ticks.length} firings over ${(ticks.at(-1)! - ticks[0]!) / 1000} s, gaps (ms): ${gaps.filter((g) => g !== EVERY_MS).join(", ") || "none"}`;
  console.log(`schedules chaos: ${summary}`);
  expect(new Set(ticks).size, summary).toBe(ticks.length);
  for (const gap of gaps) expect(gap, summary).toBeGreaterThan(0);
  for (const tick of ticks) expect((tick - sinceMs) % EVERY_MS, summary).toBe(0);
  expect(Math.max(...gaps), summary).toBeLessThanOrEqual(MAX_GAP_MS);
  expect(steady(ticks, readAt), `${summary}; read at ${readAt}, the last tick ${ticks.at(-1)}`).toBe(true);
  expect(ticks.length, summary).toBeGreaterThan((ticks.at(-1)! - ticks[0]!) / EVERY_MS / 2);
}

/** The last firings came each second, up to now (within two ticks: the one due may be under way). */
const steady = (ticks: number[], now: number): boolean =>
  ticks.length >= 4 && ticks.at(-1)! >= now - 2 * EVERY_MS && ticks.slice(-4).every((tick, i, last) => i === 0 || tick - last[i - 1]! === EVERY_MS);

describe("a schedule on three instances, one killed and one paused in turn", () => {
  it(
    `fires each tick at most once, with gaps only while its writer changes hands (${RUN_MS ? "60 s" : "each instance killed and paused"})`,
    { timeout: RUN_MS + 120_000 },
    async () => {
      const dir = join(root, "data");
      for (let i = 0; i < 3; i++) instances.push(await startInstance(["--storage", `fs:${dir}?lease=${LEASE_MS}`]));
      const sinceMs = await setSchedule(instances[1]!.url, "beats");
      const declared = await fetch(`${instances[0]!.url}/api/v1/queues/pbeats`, {
        method: "PUT",
        body: JSON.stringify({ partitions: PARTITIONS }),
        headers: { "content-type": "application/json" },
      });
      expect(declared.status).toBe(201);
      const partitionedSinceMs = await setSchedule(instances[2]!.url, "pbeats");

      const faults = await chaosLoop(instances, { runMs: RUN_MS, pauseMs: 2 * LEASE_MS });
      expectEveryInstanceKilledAndPaused(faults);
      // Quiet again: the schedule goes on each second (three gaps of a second in a row, within a take-over and 4 s).
      const driver = fsDriver({ dir });
      let readAt = Date.now();
      const read = () => Promise.all([readTicks(driver), readPartitionedTicks(driver)]);
      let [ticks, partitioned] = await read();
      for (
        const deadline = Date.now() + MAX_GAP_MS + 4 * EVERY_MS;
        Date.now() < deadline && !(steady(ticks, readAt) && steady(partitioned, readAt));
        [ticks, partitioned] = await read()
      ) {
        await sleep(500);
        readAt = Date.now();
      }
      for (const instance of instances) instance.kill("SIGKILL");
      expectFiredOnce("beats", ticks, sinceMs, readAt);
      expectFiredOnce(`pbeats (${PARTITIONS} partitions)`, partitioned, partitionedSinceMs, readAt);
    },
  );
});
