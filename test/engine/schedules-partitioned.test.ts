/**
 * Schedules of a partitioned queue (src/writer/partitioned.ts) on real files: kept by partition 0's
 * writer, each firing produced into the partition of its idempotency key, once per tick; one
 * firing after a downtime; none by a partition-0 writer whose lock was taken over.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { browseMessages } from "../../src/inspect/browse";
import { partitionName } from "../../src/partitions/declaration";
import { openPartitionedQueue } from "../../src/writer/partitioned";
import { readSchedules } from "../../src/writer/schedules";
import { readSchedules as readQueueSchedules } from "../../src/index";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-psched-");
const quiet = { onProblem: () => {} };
const PARTITIONS = 4;

/** The ticks of schedule `name`'s default firings, by partition. */
async function ticksByPartition(driver: QueueDriver, name: string): Promise<number[][]> {
  const out: number[][] = [];
  for (let p = 0; p < PARTITIONS; p++) {
    const page = await browseMessages(driver, partitionName("q", p), { from: "earliest", limit: 1000, ...quiet }).catch(() => ({ messages: [] }));
    out.push(
      page.messages
        .map((m) => JSON.parse(String(m.data)) as { schedule: string; tick: number })
        .filter((m) => m.schedule === name)
        .map((m) => m.tick),
    );
  }
  return out;
}

const allTicks = async (driver: QueueDriver, name: string) => (await ticksByPartition(driver, name)).flat().sort((a, b) => a - b);

describe("schedules of a partitioned queue", () => {
  it("fire every 200 ms into the partitions, each tick once; set, listed and removed like a queue's", async () => {
    const driver = fsDriver({ dir: tempDir() });
    const writer = await openPartitionedQueue("q", { driver, partitions: PARTITIONS, ...quiet });
    expect((await writer.schedule("tick", { everyMs: 200 })).created).toBe(true);
    expect((await writer.schedule("later", { cron: "0 3 * * *" })).created).toBe(true);
    expect((await writer.schedules()).map((s) => s.name)).toEqual(["later", "tick"]);
    // Kept with partition 0's writer, listed from storage by anyone.
    expect((await readSchedules(driver, partitionName("q", 0))).map((s) => s.name)).toEqual(["later", "tick"]);
    // The package's readSchedules takes the queue's name.
    expect((await readQueueSchedules(driver, "q")).map((s) => s.name)).toEqual(["later", "tick"]);
    await sleep(1700);
    expect(await writer.unschedule("later")).toBe(true);
    expect(await writer.unschedule("later")).toBe(false);
    await writer.close();
    const byPartition = await ticksByPartition(driver, "tick");
    const fired = byPartition.flat().sort((a, b) => a - b);
    expect(fired.length).toBeGreaterThanOrEqual(5);
    // One firing a tick, none skipped, and spread over more than one partition (routed by key).
    for (let i = 1; i < fired.length; i++) expect(fired[i]! - fired[i - 1]!).toBe(200);
    expect(byPartition.filter((ticks) => ticks.length > 0).length).toBeGreaterThan(1);
    expect((await readSchedules(driver, partitionName("q", 0))).find((s) => s.name === "tick")!.lastFiredAt).toBe(fired.at(-1));
  });

  it("after a downtime, fire once for the ticks missed (the next writer opened fires them), then each tick", async () => {
    const driver = fsDriver({ dir: tempDir() });
    const writer = await openPartitionedQueue("q", { driver, partitions: PARTITIONS, ...quiet });
    await writer.schedule("tick", { everyMs: 200 });
    await sleep(500);
    await writer.close();
    const before = await allTicks(driver, "tick");
    await sleep(1200);
    const reopenedAt = Date.now();
    const again = await openPartitionedQueue("q", { driver, ...quiet });
    const atOpen = await allTicks(driver, "tick");
    expect(atOpen.length).toBe(before.length + 1);
    expect(atOpen.at(-1)!).toBeGreaterThan(reopenedAt - 200);
    await sleep(700);
    await again.close();
    const after = await allTicks(driver, "tick");
    expect(new Set(after).size).toBe(after.length);
    for (let i = before.length + 1; i < after.length; i++) expect(after[i]! - after[i - 1]!).toBe(200);
    expect(after.length).toBeGreaterThanOrEqual(atOpen.length + 2);
  });

  it("a partition-0 writer whose lock was taken over fires nothing", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir, lockLeaseMs: 1000 });
    const lost: number[] = [];
    const writer = await openPartitionedQueue("q", { driver, partitions: PARTITIONS, ...quiet, onLockLost: (p) => lost.push(p) });
    await writer.schedule("tick", { everyMs: 200 });
    await sleep(450);
    // Another instance takes partition 0's lock (a newer epoch in its file), as after this one was paused past its lease.
    const file = join(dir, `${partitionName("q", 0)}_queue.lock`);
    const [, start, host, epoch, nonce] = readFileSync(file, "utf8").trim().split(" ");
    writeFileSync(file, `999999 ${start} ${host} ${Number(epoch) + 1} ${nonce}\n`);
    const stale = (await allTicks(driver, "tick")).length;
    await sleep(1000);
    expect(await allTicks(driver, "tick")).toHaveLength(stale);
    expect(lost).toContain(0);
    await writer.close().catch(() => {});
  });
});
