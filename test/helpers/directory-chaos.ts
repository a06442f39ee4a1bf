/**
 * The chaos run on ONE fs directory, shared by test/instances/multi-instance.test.ts (`v-queue serve`
 * processes) and test/hosts/node-cluster-chaos.test.ts (Nitro `node-cluster` workers): traffic on
 * every instance while one after another is SIGKILLed and restarted or SIGSTOPped, then the
 * checks: every acknowledged message consumed (each key in order), lags 0, every record's CRC
 * good and numbered, each message stored once, stale writers stopped and counted when leased, and
 * no 409 but a few E_LOCKED (retried, as the SDK does). On a partitioned queue or an ordinary one.
 */
import { readFile } from "node:fs/promises";
import { join } from "pathe";
import { expect } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { writerLockPath } from "../../src/storage/paths";
import {
  busyThenWanted,
  lagsByPartition,
  chaosLoop,
  expectEveryInstanceKilledAndPaused,
  expectFewConflicts,
  expectKeysInOrder,
  readAllRecords,
  settle,
  startTraffic,
  totalFencedWrites,
  totalLag,
  type Instance,
} from "./multi-instance";

export interface DirectoryChaos {
  /** Printed before the run's figures. */
  label: string;
  dir: string;
  instances: Instance[];
  queue: string;
  /** The queue's partitions; 0: an ordinary queue. */
  partitions: number;
  runMs: number;
  /** The instances' lock lease (`fs:<dir>?lease=`); none: locks held while their process lives. */
  leaseMs?: number;
  /** Produces sent at once to an instance just before it is paused, and to the next one while it is (leased). */
  burst: number;
  /** Instances behind one port (node-cluster workers): each ordered consumer loop keeps its connection. */
  pinOrdered?: boolean;
}

export async function expectDirectoryChaosLosesNothing({
  label,
  dir,
  instances,
  queue,
  partitions,
  runMs,
  leaseMs,
  burst,
  pinOrdered,
}: DirectoryChaos): Promise<void> {
  const traffic = startTraffic(instances, { queue, producers: 2, keysPerProducer: 4, pinOrdered, partitionKeys: partitions > 0 });
  // Leased: an instance paused while it writes has writes in flight that land after its lease
  // (fenced), and partitions the others ask for meanwhile (taken over: its locks found lost).
  const holdsWriter = async (instance: number) => {
    const pid = instances[instance]!.pid?.();
    return pid !== undefined && (await writerLockPid(dir, queue)) === pid;
  };
  const beforePause = leaseMs ? busyThenWanted(traffic, instances.length, burst, partitions, holdsWriter) : undefined;
  const faults = await chaosLoop(instances, { runMs, pauseMs: leaseMs ? 2 * leaseMs : 1000, beforePause, countFenced: true });
  const { kills, pauses } = faults;
  await traffic.stopProducing();

  // Everything acknowledged reaches both consumers (lingering leases run out, hand-overs settle).
  const driver = fsDriver({ dir });
  await settle(traffic, driver, queue, partitions, 60_000);
  await traffic.stopConsuming();

  const expected = traffic.expected();
  const fencedWrites = await totalFencedWrites(instances);
  const { retries, orderedErrors, commitRetries, fencedAnswers, statuses, conflicts } = traffic.counts;
  console.log(
    `[${label}] ${expected.length} messages acknowledged, ${kills} kills, ${pauses} pauses, ${retries} produce retries ${JSON.stringify(statuses)}, ${orderedErrors} failed consumes, ${commitRetries} commits sent again, 409s answered ${JSON.stringify(conflicts)} of ${traffic.counts.answers} answers; ` +
      `stale-writer rejections: ${fencedWrites.storage} by the fence (vqueue_fenced_writes_total), ${fencedWrites.lease} writer locks lost to another instance (vqueue_writer_locks_lost_total), ${fencedAnswers} E_FENCED seen by producers`,
  );
  expectEveryInstanceKilledAndPaused(faults);
  expectFewConflicts(traffic);
  // Default locks never change hands while their holder lives: nothing to fence. Leased: the
  // pauses met stale writers, as each instance's counters say. Behind one port (node-cluster)
  // `/metrics` is whichever worker answers: a partitioned queue's many lost locks show in any
  // sample, an ordinary queue's one writer lock (lost once or twice a run) often in none, so
  // there the count is printed, not asserted (once 0 in a CI run at load 12, beside another).
  const oneWriterBehindOnePort = pinOrdered && partitions === 0;
  if (leaseMs && !oneWriterBehindOnePort) expect(fencedWrites.storage + fencedWrites.lease).toBeGreaterThan(0);
  if (!leaseMs) expect(fencedWrites).toEqual({ storage: 0, lease: 0 });
  expect(expected.length).toBeGreaterThan(100);
  expect(traffic.missingOrdered()).toEqual([]);
  expect(traffic.missingShared()).toEqual([]);
  const lag = await totalLag(driver, queue, partitions);
  if (lag > 0)
    console.log(
      `[${label}] lags left: ${JSON.stringify(await lagsByPartition(driver, queue, partitions))}; commits answered: ${JSON.stringify(traffic.counts.commitStatuses)}`,
    );
  expect(lag).toBe(0);
  expectKeysInOrder(traffic.ordered);

  // Every record of every partition reads back with a good CRC.
  const { problems, records, misnumbered, duplicates } = await readAllRecords(driver, queue, partitions);
  if (duplicates.length > 0) console.log(`[${label}] stored twice (${duplicates.length}): ${duplicates.slice(0, 20).join(" | ")}`);
  expect(misnumbered).toEqual([]);
  expect(problems.filter((p) => p.code !== "TORN_TAIL" && p.code !== "NO_INDEX")).toEqual([]);
  // Idempotency keys kept retries from writing twice: exactly the messages acknowledged.
  expect(records).toBe(expected.length);
}

/** The process whose name an ordinary queue's writer lock file (`<queue>_queue.lock`: `pid start host epoch nonce`) holds now, if any. */
async function writerLockPid(dir: string, queue: string): Promise<number | undefined> {
  const text = await readFile(join(dir, writerLockPath(queue)), "utf8").catch(() => "");
  return Number(text.split(" ")[0]) || undefined;
}
