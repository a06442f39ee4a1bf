/**
 * Several `v-queue serve` processes (the built CLI) on ONE data directory, one queue shared by all
 * of them, while one instance after another is SIGKILLed and restarted or SIGSTOPped: every
 * message answered 2xx is consumed (ordered: each key in order, at least once; shared: at least
 * once), no record fails its CRC, the lags reach 0, and no 409 but a few E_LOCKED (retried, as the
 * SDK does) reaches the clients. Four runs: a partitioned queue and an ordinary one (no partitions:
 * its one writer and its consumers handed over between the instances on request), each with the fs
 * driver's default locks (held while their process lives: paused for a second, an instance keeps
 * what it holds) and with leased locks (`fs:<dir>?lease=2000`: paused for twice the lease just
 * after a burst of produces, it loses them, and its late writes are fenced or its writer lock found
 * lost; on the ordinary queue the burst first waits until the instance holds the queue's writer).
 * Each instance's /metrics is read before it is killed (its monitor runs, as when it is watched).
 * ~25-35 s each (CI: every instance killed once and paused once); `VQ_SOAK=1` runs 2 minutes. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, it } from "vitest";
import { expectDirectoryChaosLosesNothing } from "../helpers/directory-chaos";
import { CHAOS, startInstance, type Instance } from "../helpers/multi-instance";

const { runMs: RUN_MS, runName: RUN_NAME, instances: INSTANCES, partitions: PARTITIONS, queue: QUEUE, leaseMs: LEASE_MS, burst: BURST } = CHAOS;

const root = mkdtempSync(join(tmpdir(), "vq-multi-"));
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

describe.each([
  { locks: "locks held while their process lives", leased: false, kind: "a partitioned queue", partitions: PARTITIONS },
  { locks: `leased locks (${LEASE_MS} ms)`, leased: true, kind: "a partitioned queue", partitions: PARTITIONS },
  { locks: "locks held while their process lives", leased: false, kind: "an ordinary queue", partitions: 0 },
  { locks: `leased locks (${LEASE_MS} ms)`, leased: true, kind: "an ordinary queue", partitions: 0 },
])("several instances on one directory, $kind, $locks", ({ leased, partitions }) => {
  it(`every acknowledged message is consumed through kills and pauses (${RUN_NAME})`, { timeout: RUN_MS + 120_000 }, async () => {
    const name = `${leased ? "leased" : "pid"}-${partitions > 0 ? "partitioned" : "ordinary"}`;
    const dir = join(root, name);
    const config = join(root, `vqueue.config.${name}.json`);
    const queues = partitions > 0 ? { queues: { [QUEUE]: { partitions } } } : {};
    writeFileSync(config, JSON.stringify({ durability: "none", ...queues, shared: { leaseMs: 5000 } }));
    const mine: Instance[] = [];
    for (let i = 0; i < INSTANCES; i++)
      mine.push(await startInstance([...(leased ? ["--storage", `fs:${dir}?lease=${LEASE_MS}`] : ["--dir", dir]), "--config", config]));
    instances.push(...mine);

    await expectDirectoryChaosLosesNothing({
      label: `multi-instance, ${name}`,
      dir,
      instances: mine,
      queue: QUEUE,
      partitions,
      runMs: RUN_MS,
      leaseMs: leased ? LEASE_MS : undefined,
      burst: BURST,
    });
    for (const instance of mine) instance.kill("SIGKILL");
  });
});
