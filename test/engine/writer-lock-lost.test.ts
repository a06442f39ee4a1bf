/**
 * A writer lock taken and then lost to another instance before the writer's first write (its
 * process paused between the two, as a SIGSTOP under the chaos runs does): the open fails with
 * `E_FENCED`, and the loss is still reported (`onLockLost`, the server's
 * `vqueue_writer_locks_lost_total`), on an ordinary queue and on a partition.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-lock-lost-");
const quiet = { onProblem: () => {} };

/** The fs driver with leased locks, the lock at `victim` taken over by "another instance" (a newer epoch in its file) as soon as it is taken. */
function takenOverAtOnce(dir: string, victim: string): QueueDriver {
  const base = fsDriver({ dir, lockLeaseMs: 1000 });
  return {
    ...base,
    async lock(path) {
      const lock = await base.lock(path);
      if (path !== victim) return lock;
      const file = join(dir, path);
      const [, start, host, epoch, nonce] = readFileSync(file, "utf8").trim().split(" ");
      writeFileSync(file, `999999 ${start} ${host} ${Number(epoch) + 1} ${nonce}\n`);
      return lock;
    },
  };
}

describe("a writer lock lost before the writer's first write", () => {
  it.each([
    {
      kind: "an ordinary queue",
      lock: "q_queue.lock",
      open: (driver: QueueDriver, onLockLost: (p: number) => void) => PartitionedWriter.ordinary("q", { driver, onLockLost, ...quiet }),
    },
    {
      kind: "a partitioned queue",
      lock: "q.p0_queue.lock",
      open: (driver: QueueDriver, onLockLost: (p: number) => void) => PartitionedWriter.open("q", { driver, partitions: 1, onLockLost, ...quiet }),
    },
  ])("$kind: the produce fails with E_FENCED and the lost lock is reported once", async ({ lock, open }) => {
    const driver = takenOverAtOnce(tempDir(), lock);
    const lost: number[] = [];
    const writer = await open(driver, (p) => lost.push(p));
    await expect(writer.produce(["x"])).rejects.toMatchObject({ code: "E_FENCED" });
    expect(lost).toEqual([0]);
    await writer.close().catch(() => {});
  });
});
