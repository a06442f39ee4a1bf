/**
 * A stale lock holder for the fencing tests: `node --import jiti/register test/helpers/fence-child.ts <mode> <url> <prefix> <leaseMs>`.
 * `<url>` is a `redis://` URL, or a storage spec (`redis+vq+sentinel://...`, `fs:<dir>?lease=<ms>`: prefix and lease are the spec's).
 * Its locks are made blind to their loss (`assertHeld` passes, `lost` never aborts), as if the
 * process had been paused right after its last check: only the driver's fence can stop it.
 * - `writer`: pushes `old-<i>` to queue `fq` one at a time (fsync), printing `ack <i>`, or
 *   `err <code>` once, then stays.
 * - `consumer`: on queue `cq`, reads one message of consumer `c` at a time and commits it,
 *   printing `commit <seq>`, or `err <code>` once, then stays.
 */
import redisDriver from "../../adapters/drivers/redis";
import { resolveStorageDriver } from "../../adapters/storage";
import type { DriverLock, QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";

const [mode, url, prefix, leaseMs] = process.argv.slice(2);
const inner = /^rediss?:\/\//.test(url!) ? redisDriver({ redis: url!, prefix: prefix!, lockLeaseMs: Number(leaseMs) }) : await resolveStorageDriver(url!);
const out = (line: string) => process.stdout.write(`${line}\n`);

/** The same lock object (the fence is looked up by it), with its own checks switched off. */
const blind = (lock: DriverLock | undefined): DriverLock | undefined => {
  if (!lock) return lock;
  Object.defineProperty(lock, "assertHeld", { value: async () => {} });
  Object.defineProperty(lock, "lost", { value: new AbortController().signal });
  return lock;
};
const driver: QueueDriver = { ...inner, lock: async (path) => blind(await inner.lock(path)) };

const fail = (error: unknown) => {
  out(`err ${(error as { code?: string }).code ?? (error as Error).message}`);
  setInterval(() => {}, 1000);
};

if (mode === "writer") {
  const q = await QueueWriter.open("fq", { driver, durability: "fsync", rollOnOpen: false });
  out("ready");
  try {
    for (let i = 0; ; i++) {
      await q.push(`old-${i}`);
      out(`ack ${i}`);
    }
  } catch (error) {
    fail(error);
  }
} else if (mode === "consumer") {
  const c = await QueueConsumer.open("cq", "c", { driver, syncCommits: true });
  out("ready");
  try {
    for (;;) {
      const [m] = await c.poll({ max: 1 });
      await c.commit();
      out(`commit ${m!.seq}`);
    }
  } catch (error) {
    fail(error);
  }
}
