/**
 * Three `v-queue serve` processes (the built CLI) on a real 6-node Redis Cluster (3 masters, 3
 * replicas), two queues shared by all of them in one run: a partitioned one, and an ordinary one
 * (not declared: its one writer and its consumers handed over between the instances on request).
 * Every 2 s an instance is SIGKILLed and restarted or SIGSTOPped for twice its lock lease (another
 * takes its partitions and the ordinary queue's writer over; its writes after SIGCONT are fenced),
 * and once a Redis master is killed and its replica takes over. The instances WAIT for one replica
 * (`replicas=1`), so nothing answered 2xx may be lost. After the run, for each queue: every
 * acknowledged message is consumed (ordered: each key in order; shared: at least once), no record
 * fails its CRC, lags reach 0, no 409 but a few E_LOCKED; stale-writer rejections happened and are
 * counted (both queues' together: the metrics have no queue label). ~40 s (every instance killed
 * once and paused once); `VQ_SOAK=1` runs 2 minutes. Needs `npm run build` (dist/) and redis-server.
 *
 * It found two bugs, now fixed: an ack over several partitions, one failing meanwhile, answered
 * as a whole failure although the others were written (those messages never came again), and a
 * server restarted during the failover exiting instead of waiting for Redis. The consumers
 * follow the API: `rewind` after a consume that got no answer; an ack answered 5xx or E_IO counts
 * as delivered (it may have been written), and such messages are reported.
 *
 * Its third find, a rare loss (about 1 run in 10 with two runs at once), is fixed too: a read
 * that failed (the cluster down during the failover) after it had taken messages dropped them,
 * while the consumer's position had passed them, so no worker ever got them (ordered or shared;
 * traced with the leases of the lost message's neighbours, which this test prints on a loss).
 * Now in the default run (CI: the short run). Its fourth find, in about 1 run in 10 under load, retries
 * stored twice, is fixed too: a writer's open compacts the idempotency file (cut, then written),
 * and a failure between the two left it empty, every key forgotten (src/storage/side-log.ts now writes a
 * journal first; 20 runs after the fix, two at once: no copy). So every run now checks the storage
 * exactly: the records are the messages acknowledged, each once.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { Cluster } from "ioredis";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import redisDriver from "../../adapters/drivers/redis";
import type { QueueDriver } from "../../src/core/driver";
import {
  busyThenWanted,
  CHAOS,
  chaosLoop,
  expectEveryInstanceKilledAndPaused,
  expectFewConflicts,
  expectKeysInOrder,
  readAllRecords,
  readDeadLetters,
  settle,
  startInstance,
  startTraffic,
  totalFencedWrites,
  totalLag,
  type Instance,
  type Traffic,
} from "../helpers/multi-instance";
import { redisTestsRun } from "../helpers/redis";
import { startRedisCluster, type RedisCluster } from "../helpers/redis-cluster";
import { sleep } from "../helpers/sleep";

const { runMs: RUN_MS, runName: RUN_NAME, instances: INSTANCES, partitions: PARTITIONS, queue: QUEUE, leaseMs: LEASE_MS, burst: BURST } = CHAOS;
/** Not declared: an ordinary queue, in the same run as the partitioned one. */
const ORDINARY_QUEUE = "plain";
/** When the Redis master is killed (then restarted once its replica has taken over, to rejoin as a replica). */
const MASTER_KILL_AT_MS = 7000;

const available = redisTestsRun("many instances on a Redis Cluster");

describe.skipIf(!available)("three instances on a 6-node Redis Cluster, a partitioned queue and an ordinary one", () => {
  const root = mkdtempSync(join(tmpdir(), "vq-redis-instances-"));
  const instances: Instance[] = [];
  let cluster: RedisCluster | undefined;
  let driver: QueueDriver | undefined;

  afterAll(async () => {
    for (const instance of instances) instance.kill("SIGKILL");
    await driver?.dispose?.();
    await cluster?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it(`every acknowledged message is consumed through instance kills, pauses and a master failover (${RUN_NAME})`, { timeout: RUN_MS + 240_000 }, async () => {
    cluster = await startRedisCluster({ nodeTimeoutMs: 2000 });
    const [victim, ...otherMasters] = await cluster.masters();
    // The instances' startup node is one that stays up (ioredis learns the others from it).
    const entry = cluster.nodes.find((n) => n.port !== victim)!.port;
    const storage = `redis+vq://127.0.0.1:${entry}/0?cluster=1&prefix=chaos&lease=${LEASE_MS}&replicas=1&waitMs=2000`;
    const config = join(root, "vqueue.config.json");
    writeFileSync(
      config,
      JSON.stringify({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 5000, maxDeliveries: 20 } }),
    );
    for (let i = 0; i < INSTANCES; i++) instances.push(await startInstance(["--storage", storage, "--config", config]));
    driver = redisDriver({
      redis: new Cluster(cluster.startupNodes, { clusterRetryStrategy: (times) => Math.min(100 * times, 1000) }),
      prefix: "chaos",
      disposeClient: true,
    });

    // Both queues in the same run (the same instances, kills, pauses and failover): the partitioned
    // one, and an ordinary one (not declared) whose one writer and consumers are handed over between the instances.
    const partitioned = startTraffic(instances, { queue: QUEUE, producers: 2, keysPerProducer: 4 });
    const ordinary = startTraffic(instances, { queue: ORDINARY_QUEUE, producers: 1, keysPerProducer: 4, partitionKeys: false });
    let failover = "";
    const masterKill = (async () => {
      await sleep(MASTER_KILL_AT_MS);
      const started = Date.now();
      cluster!.kill(victim!);
      // Its replica is promoted (three live masters again) before the cluster is healthy: a
      // health check alone could pass before the others noticed the kill, and the victim, restarted
      // that soon, would take its slots back as a master.
      for (const deadline = Date.now() + 60_000; (await cluster!.masters()).length < otherMasters.length + 1 && Date.now() < deadline;) await sleep(100);
      await cluster!.waitHealthy(60_000);
      const took = Date.now() - started;
      await cluster!.restart(victim!);
      await cluster!.waitHealthy(60_000);
      await cluster!.waitSynced(60_000);
      // The restarted node reads its old nodes.conf (a master) and learns of its demotion from the others: a moment.
      let masters = await cluster!.masters();
      for (const deadline = Date.now() + 30_000; masters.includes(victim!) && Date.now() < deadline; masters = await cluster!.masters()) await sleep(200);
      failover = `master ${victim} killed, a replica took over in ${took} ms; masters now ${masters.join(",")} (were ${[victim, ...otherMasters].join(",")})`;
      expect(masters).not.toContain(victim);
    })();
    // An instance paused while it writes has writes in flight that land after its lease: fenced.
    // The ordinary queue's burst first: it waits until the instance holds that queue's writer.
    const ordinaryBusy = busyThenWanted(ordinary, INSTANCES, BURST, 0);
    const partitionedBusy = busyThenWanted(partitioned, INSTANCES, BURST, PARTITIONS);
    const beforePause = async (instance: number) => {
      await ordinaryBusy(instance);
      await partitionedBusy(instance);
    };
    const faults = await chaosLoop(instances, { runMs: RUN_MS, pauseMs: 2 * LEASE_MS, beforePause, countFenced: true });
    const { kills, pauses } = faults;
    await masterKill;
    await Promise.all([partitioned.stopProducing(), ordinary.stopProducing()]);

    await Promise.all([settle(partitioned, driver, QUEUE, PARTITIONS, 90_000), settle(ordinary, driver, ORDINARY_QUEUE, 0, 90_000)]);
    await Promise.all([partitioned.stopConsuming(), ordinary.stopConsuming()]);

    const fencedWrites = await totalFencedWrites(instances);
    console.log(
      `[redis-cluster-instances] ${kills} kills, ${pauses} pauses, ${failover}; ` +
        `stale-writer rejections: ${fencedWrites.storage} by the storage's fence (vqueue_fenced_writes_total), ${fencedWrites.lease} writer locks lost to another instance (vqueue_writer_locks_lost_total)`,
    );
    expect(failover).not.toBe("");
    expectEveryInstanceKilledAndPaused(faults);
    // A paused writer is stopped by its own lease check (it asks Redis before writing) or, for a
    // write already on its way when it was paused, by the storage's fence: either is counted.
    // (The fence alone, at a forced instant, is tested in test/drivers/redis.test.ts.)
    expect(fencedWrites.storage + fencedWrites.lease).toBeGreaterThan(0);
    await expectNothingLost(`${QUEUE}, partitioned`, partitioned, driver, QUEUE, PARTITIONS);
    await expectNothingLost(`${ORDINARY_QUEUE}, ordinary`, ordinary, driver, ORDINARY_QUEUE, 0);
  });
});

/**
 * The checks of one queue after the run: every acknowledged message consumed (each key in order),
 * lags 0, no dead letter, every record's CRC good and numbered, each message stored once; a lost
 * message is named with where it is missing (in the storage, or only at a consumer) and its neighbours' leases.
 */
async function expectNothingLost(label: string, traffic: Traffic, driver: QueueDriver, queue: string, partitions: number): Promise<void> {
  const expected = traffic.expected();
  const { retries, orderedErrors, fencedAnswers, statuses, ambiguousAcks, conflicts } = traffic.counts;
  console.log(
    `[redis-cluster-instances, ${label}] ${expected.length} messages acknowledged, ${fencedAnswers} E_FENCED seen by producers; ` +
      `${retries} produce retries ${JSON.stringify(statuses)}, ${orderedErrors} failed consumes, 409s answered ${JSON.stringify(conflicts)} of ${traffic.counts.answers} answers, ${ambiguousAcks} acks answered 5xx (${traffic.onlyAmbiguous().length} messages delivered only so)`,
  );
  // Every record of every partition reads back through the redis driver with a good CRC.
  const { problems, records, stored, misnumbered, duplicates } = await readAllRecords(driver, queue, partitions);
  if (duplicates.length > 0) console.log(`[redis-cluster-instances, ${label}] stored twice (${duplicates.length}): ${duplicates.slice(0, 20).join(" | ")}`);
  // A lost message is named, with where it is missing: in the storage (a write acknowledged but
  // lost, e.g. with a failover) or only at a consumer (a delivery bug).
  const missingOrdered = traffic.missingOrdered();
  const missingShared = traffic.missingShared();
  const lag = await totalLag(driver, queue, partitions);
  // A hand-out counts as a delivery even when its answer is lost (a kill, a pause), so a message
  // could reach maxDeliveries without any worker having had it: 20 here, and any letter is
  // reported and fails the run.
  const letters = await readDeadLetters(driver, queue, partitions);
  if (letters.length > 0) console.log(`[redis-cluster-instances, ${label}] dead letters: ${letters.slice(0, 20).join(" | ")}`);
  for (const [consumer, missing] of [
    ["ordered", missingOrdered],
    ["shared", missingShared],
  ] as const) {
    if (missing.length > 0) console.log(`[redis-cluster-instances, ${label}] lag now ${lag}; ${consumer} missing:`);
    if (missing.length > 0)
      console.log(
        `[redis-cluster-instances, ${label}] LOST for the ${consumer} consumer (${missing.length}): ${missing
          .slice(0, 40)
          .map((m) => `${m} (${stored.get(m.split("/").pop()!) ?? "not in storage"})`)
          .join(", ")}`,
      );
    if (consumer === "shared")
      for (const m of missing.slice(0, 5))
        console.log(`[redis-cluster-instances, ${label}] leases at ${m}'s position: ${traffic.leasesAt(positionOf(stored.get(m))).join(" | ") || "none"}`);
  }
  // A message never handed out: who handed out its neighbours (one holder's read, or a hand-over
  // between them?), and the queue's shared-consumer files as they are now.
  for (const m of missingShared.slice(0, 2)) {
    const at = /^(?:p(\d+) )?(\d+):\d+ #(\d+)/.exec(stored.get(m) ?? "");
    if (!at) continue;
    const [partition, part, seq] = [at[1], Number(at[2]), Number(at[3])];
    const prefix = `${partition === undefined ? "" : `p${partition} `}${part}:`;
    const near = [...stored.values()]
      .filter((where) => where.startsWith(prefix) && Math.abs(Number(where.split("#")[1]) - seq) <= 6)
      .sort((a, b) => Number(a.split("#")[1]) - Number(b.split("#")[1]));
    for (const where of near) console.log(`[redis-cluster-instances, ${label}]   ${where}: ${traffic.leasesAt(positionOf(where)).join(" | ") || "none"}`);
    const name = partition === undefined ? queue : `${queue}.p${partition}`;
    for (const path of [`${name}_info_pop_work`, `${name}_info_shared_work`, `${name}_info_shlog_work`]) {
      const bytes = await driver.readRecord(path);
      console.log(`[redis-cluster-instances, ${label}]   ${path}: ${bytes ? JSON.stringify(new TextDecoder().decode(bytes).slice(0, 1500)) : "missing"}`);
    }
  }
  expect(misnumbered).toEqual([]);
  expect(expected.length).toBeGreaterThan(100);
  expect(missingOrdered).toEqual([]);
  expect(missingShared).toEqual([]);
  expect(lag).toBe(0);
  expect(letters).toEqual([]);
  expectKeysInOrder(traffic.ordered);
  expectFewConflicts(traffic);
  expect(problems.filter((p) => p.code !== "TORN_TAIL" && p.code !== "NO_INDEX")).toEqual([]);
  // Idempotency keys kept retries from writing twice: exactly the messages acknowledged, each once.
  expect(duplicates).toEqual([]);
  expect(records).toBe(expected.length);
}

/** "p1 0:2189 #63" (where a message is stored) as a lease token's position, "p1:0.2189" (an ordinary queue's "0:2189 #63": "0.2189"). */
function positionOf(stored: string | undefined): string {
  const match = /^(?:p(\d+) )?(\d+):(\d+)/.exec(stored ?? "");
  return match ? `${match[1] === undefined ? "" : `p${match[1]}:`}${match[2]}.${match[3]}` : "";
}
