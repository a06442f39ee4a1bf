/**
 * Nitro's `node-cluster` preset under chaos: 3 workers on ONE data directory, one queue produced
 * to (keys and idempotency keys, retried until answered 2xx) and consumed (ordered and shared)
 * through the cluster's one port, while every 2 s a worker is SIGKILLed (the primary forks
 * another) or SIGSTOPped. Each ordered consumer loop is a consumer of its own on one kept-alive
 * connection (clients of one name could poll one worker at once and finish their batches in any
 * order). The same run and checks as test/instances/multi-instance.test.ts
 * (test/helpers/directory-chaos.ts): every acknowledged message consumed, each key in order, lags
 * 0, every record's CRC good, each message stored once, no 409 but a few E_LOCKED. Three runs: a
 * partitioned queue with the default locks (paused for a second) and with leased locks
 * (`fs:<dir>?lease=2000`, paused for twice the lease: stale writers stopped and counted), and an
 * ordinary queue (not declared: its one writer and its consumers handed over between the workers)
 * with leased locks, each worker paused once it holds the queue's writer (its lock file names the
 * worker: any worker answers through the one port; its stale-writer counts are printed, not
 * asserted: `/metrics` there is whichever worker answers). ~25-35 s each (every worker killed once and
 * paused once; `VQ_SOAK=1`: 2 minutes). Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildClusterApp, startCluster, workerInstances, type RunningCluster } from "./_node-cluster";
import { expectDirectoryChaosLosesNothing } from "../helpers/directory-chaos";
import { CHAOS } from "../helpers/multi-instance";
import { sleep } from "../helpers/sleep";

const { runMs: RUN_MS, runName: RUN_NAME, instances: WORKERS, partitions: PARTITIONS, queue: QUEUE, leaseMs: LEASE_MS, burst: BURST } = CHAOS;
/** Not declared in the app's config: an ordinary queue. */
const ORDINARY_QUEUE = "plain";

describe(`Nitro node-cluster under chaos: ${WORKERS} workers on one directory`, () => {
  const root = mkdtempSync(join(tmpdir(), "vq-cluster-chaos-"));
  let app = "";
  const clusters: RunningCluster[] = [];

  beforeAll(async () => {
    app = await buildClusterApp({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 5000 } });
  }, 600_000);

  afterAll(() => {
    for (const cluster of clusters) cluster.kill();
    if (app) rmSync(app, { recursive: true, force: true });
    rmSync(root, { recursive: true, force: true });
  });

  it.each([
    { kind: "a partitioned queue", locks: "locks held while their process lives", leased: false, partitions: PARTITIONS },
    { kind: "a partitioned queue", locks: `leased locks (${LEASE_MS} ms)`, leased: true, partitions: PARTITIONS },
    // Not declared: an ordinary queue (one log, its writer and consumers handed over between the workers).
    { kind: "an ordinary queue", locks: `leased locks (${LEASE_MS} ms)`, leased: true, partitions: 0 },
  ])(
    `every acknowledged message is consumed through worker kills and pauses, $kind, $locks (${RUN_NAME})`,
    { timeout: RUN_MS + 180_000 },
    async ({ leased, partitions }) => {
      const name = `${leased ? "leased" : "data"}${partitions > 0 ? "" : "-ordinary"}`;
      const dir = join(root, name);
      const cluster = await startCluster(
        app,
        WORKERS,
        leased ? { NITRO_V_QUEUE_DEFAULT_STORAGE: `fs:${dir}?lease=${LEASE_MS}` } : { NITRO_V_QUEUE_DEFAULT_DIR: dir },
      );
      clusters.push(cluster);
      // Every worker is up (the first answered /health; the others may still be starting).
      for (const deadline = Date.now() + 60_000; cluster.workers().length < WORKERS && Date.now() < deadline;) await sleep(100);
      const workers = workerInstances(cluster);
      expect(workers).toHaveLength(WORKERS);

      await expectDirectoryChaosLosesNothing({
        label: `node-cluster${leased ? ", leased" : ""}${partitions > 0 ? "" : ", ordinary"}`,
        dir,
        instances: workers,
        queue: partitions > 0 ? QUEUE : ORDINARY_QUEUE,
        partitions,
        runMs: RUN_MS,
        leaseMs: leased ? LEASE_MS : undefined,
        burst: BURST,
        pinOrdered: true,
      });
      cluster.kill();
    },
  );
});
