/**
 * Several `v-queue serve` processes (the built CLI) on ONE data directory, a partitioned queue
 * shared by all of them, while one instance after another is SIGKILLed and restarted or
 * SIGSTOPped for a second: every message answered 2xx is consumed (ordered: each key in order,
 * at least once; shared: at least once), no record fails its CRC, and the lags reach 0.
 * Each instance's /metrics is read before it is killed (its monitor runs, as when it is watched).
 * ~30 s (CI); `VQ_SOAK=1` runs 2 minutes. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../adapters/drivers/fs";
import { chaosLoop, expectKeysInOrder, readAllRecords, settle, startInstance, startTraffic, totalLag, type Instance } from "./helpers/multi-instance";

const SOAK = process.env.VQ_SOAK === "1";
const RUN_MS = SOAK ? 120_000 : 30_000;
const INSTANCES = 3;
const PARTITIONS = 6;
const QUEUE = "events";

const root = mkdtempSync(join(tmpdir(), "vq-multi-"));
const dir = join(root, "data");
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

describe("several instances on one directory, a partitioned queue", () => {
  it(`every acknowledged message is consumed through kills and pauses (${RUN_MS / 1000} s)`, { timeout: RUN_MS + 120_000 }, async () => {
    const config = join(root, "vqueue.config.json");
    writeFileSync(config, JSON.stringify({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 5000 } }));
    for (let i = 0; i < INSTANCES; i++) instances.push(await startInstance(["--dir", dir, "--config", config]));

    const traffic = startTraffic(instances, { queue: QUEUE, producers: 2, keysPerProducer: 4 });
    const { kills, pauses } = await chaosLoop(instances, { runMs: RUN_MS, pauseMs: 1000, countFenced: true });
    await traffic.stopProducing();

    // Everything acknowledged reaches both consumers (lingering leases run out, hand-overs settle).
    const driver = fsDriver({ dir });
    await settle(traffic, driver, QUEUE, PARTITIONS, 60_000);
    await traffic.stopConsuming();

    const expected = traffic.expected();
    const { retries, orderedErrors } = traffic.counts;
    console.log(`[multi-instance] ${expected.length} messages acknowledged, ${kills} kills, ${pauses} pauses, ${retries} produce retries, ${orderedErrors} failed consumes`);
    expect(kills).toBeGreaterThan(0);
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
  });
});
