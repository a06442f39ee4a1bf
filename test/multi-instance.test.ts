/**
 * Several `v-queue serve` processes (the built CLI) on ONE data directory, a partitioned queue
 * shared by all of them, while one instance after another is SIGKILLed and restarted or
 * SIGSTOPped: every message answered 2xx is consumed (ordered: each key in order, at least
 * once; shared: at least once), no record fails its CRC, and the lags reach 0. Twice: with the
 * fs driver's default locks (held while their process lives: paused for a second, an instance
 * keeps its partitions), and with leased locks (`fs:<dir>?lease=2000`: paused for twice the
 * lease just after a burst of produces, it loses them, and its late writes are fenced).
 * Each instance's /metrics is read before it is killed (its monitor runs, as when it is watched).
 * ~30 s (CI); `VQ_SOAK=1` runs 2 minutes. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../adapters/drivers/fs";
import { busyThenWanted, chaosLoop, expectKeysInOrder, readAllRecords, settle, startInstance, startTraffic, totalFencedWrites, totalLag, type Instance } from "./helpers/multi-instance";

const SOAK = process.env.VQ_SOAK === "1";
const RUN_MS = SOAK ? 120_000 : 30_000;
const INSTANCES = 3;
const PARTITIONS = 6;
const QUEUE = "events";

/** The leased run's lock lease: a SIGSTOP of twice this lets another instance take the partitions over. */
const LEASE_MS = 2000;
/** Produces sent at once to an instance just before it is paused, and to the next one while it is (leased run). */
const BURST = 60;

const root = mkdtempSync(join(tmpdir(), "vq-multi-"));
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

describe.each([
  { locks: "locks held while their process lives", leased: false },
  { locks: `leased locks (${LEASE_MS} ms)`, leased: true },
])("several instances on one directory, a partitioned queue, $locks", ({ leased }) => {
  it(`every acknowledged message is consumed through kills and pauses (${RUN_MS / 1000} s)`, { timeout: RUN_MS + 120_000 }, async () => {
    const dir = join(root, leased ? "leased" : "data");
    const config = join(root, `vqueue.config.${leased ? "leased" : "pid"}.json`);
    writeFileSync(config, JSON.stringify({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 5000 } }));
    const mine: Instance[] = [];
    for (let i = 0; i < INSTANCES; i++) mine.push(await startInstance([...(leased ? ["--storage", `fs:${dir}?lease=${LEASE_MS}`] : ["--dir", dir]), "--config", config]));
    instances.push(...mine);

    const traffic = startTraffic(mine, { queue: QUEUE, producers: 2, keysPerProducer: 4 });
    // Leased: an instance paused while it writes has writes in flight that land after its lease
    // (fenced), and partitions the others ask for meanwhile (taken over: its locks found lost).
    const beforePause = leased ? busyThenWanted(traffic, INSTANCES, BURST) : undefined;
    const { kills, pauses } = await chaosLoop(mine, { runMs: RUN_MS, pauseMs: leased ? 2 * LEASE_MS : 1000, beforePause, countFenced: true });
    await traffic.stopProducing();

    // Everything acknowledged reaches both consumers (lingering leases run out, hand-overs settle).
    const driver = fsDriver({ dir });
    await settle(traffic, driver, QUEUE, PARTITIONS, 60_000);
    await traffic.stopConsuming();

    const expected = traffic.expected();
    const fencedWrites = await totalFencedWrites(mine);
    const { retries, orderedErrors, fencedAnswers } = traffic.counts;
    console.log(
      `[multi-instance${leased ? ", leased" : ""}] ${expected.length} messages acknowledged, ${kills} kills, ${pauses} pauses, ${retries} produce retries, ${orderedErrors} failed consumes; ` +
        `stale-writer rejections: ${fencedWrites.storage} by the fence (vqueue_fenced_writes_total), ${fencedWrites.lease} writer locks lost to another instance (vqueue_writer_locks_lost_total), ${fencedAnswers} E_FENCED seen by producers`,
    );
    expect(kills).toBeGreaterThan(0);
    expect(pauses).toBeGreaterThan(0);
    // Default locks never change hands while their holder lives: nothing to fence.
    if (leased) expect(fencedWrites.storage + fencedWrites.lease).toBeGreaterThan(0);
    else expect(fencedWrites).toEqual({ storage: 0, lease: 0 });
    expect(expected.length).toBeGreaterThan(100);
    expect(traffic.missingOrdered()).toEqual([]);
    expect(traffic.missingShared()).toEqual([]);
    expect(await totalLag(driver, QUEUE, PARTITIONS)).toBe(0);
    expectKeysInOrder(traffic.ordered);

    // Every record of every partition reads back with a good CRC.
    const { problems, records, misnumbered, duplicates } = await readAllRecords(driver, QUEUE, PARTITIONS);
    if (duplicates.length > 0) console.log(`[multi-instance] stored twice (${duplicates.length}): ${duplicates.slice(0, 20).join(" | ")}`);
    expect(misnumbered).toEqual([]);
    expect(problems.filter((p) => p.code !== "TORN_TAIL" && p.code !== "NO_INDEX")).toEqual([]);
    // Idempotency keys kept retries from writing twice: exactly the messages acknowledged.
    expect(records).toBe(expected.length);
    for (const instance of mine) instance.kill("SIGKILL");
  });
});
