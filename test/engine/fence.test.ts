import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { DriverLock, LogFile, QueueDriver, RecordFile } from "../../src/core/driver";
import { VQueueError } from "../../src/core/errors";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { openSharedConsumer } from "../../src/consumers/shared/consumer";
import { purgeQueue } from "../../src/admin/purge";
import { QueueWriter } from "../../src/writer/writer";
import { sleep } from "../helpers/sleep";

interface Write {
  op: string;
  path: string;
  /** The path of the lock given as fence, "" for none. */
  fence: string;
}

/**
 * A memory driver that notes every write with the lock given as its fence (by the lock's
 * path), and can be told to refuse appends as a driver with leases refuses a stale holder's.
 */
function recordingDriver() {
  const inner: QueueDriver = memoryDriver();
  const writes: Write[] = [];
  const lockPaths = new Map<DriverLock, string>();
  const note = (op: string, path: string, fence: DriverLock | undefined) =>
    writes.push({ op, path, fence: fence ? (lockPaths.get(fence) ?? "(unknown lock)") : "" });
  let refuse: ((path: string) => boolean) | undefined;
  const log = (l: LogFile, path: string): LogFile => ({
    ...l,
    append: async (at, data, fence) => {
      if (refuse?.(path)) throw new VQueueError("E_FENCED", `refused (test): ${path}`);
      note("append", path, fence);
      return l.append(at, data, fence);
    },
    truncate: async (length, fence) => {
      note("truncate", path, fence);
      return l.truncate(length, fence);
    },
  });
  const record = (r: RecordFile, path: string): RecordFile => ({
    ...r,
    replace: async (data, fence) => {
      note("replace", path, fence);
      return r.replace(data, fence);
    },
  });
  const driver: QueueDriver = {
    ...inner,
    lock: async (path) => {
      const lock = await inner.lock(path);
      if (lock) lockPaths.set(lock, path);
      return lock;
    },
    openLog: async (path, options) => {
      const l = await inner.openLog(path, options);
      return l && log(l, path);
    },
    openRecord: async (path, options) => {
      const r = await inner.openRecord(path, options);
      return r && record(r, path);
    },
    writeAtomic: async (path, data, options) => {
      note("writeAtomic", path, options.fence);
      return inner.writeAtomic!(path, data, options);
    },
  };
  return { driver, writes, refuseAppends: (which: typeof refuse) => (refuse = which) };
}

/** The lock a write of `path` (a file of queue "q") must carry: its consumer's for a consumer's files, else the writer's. */
const holderOf = (path: string) => {
  const consumer = /^q_info_(?:pop|shared|shlog|outc|outn)_(.+)$/.exec(path)?.[1];
  return consumer ? `q_info_pop_${consumer}.lock` : "q_queue.lock";
};

describe("fencing plumbing: every holder's write carries its lock", () => {
  it("the writer (parts, info lines, index, dictionary, side logs, pruned record), consumers, a shared consumer and purge", async () => {
    const { driver, writes } = recordingDriver();
    const q = await QueueWriter.open("q", {
      driver,
      durability: "fsync",
      maxPartBytes: 2048,
      indexInterval: 2,
      compression: "zstd",
      compressionSampleBytes: 1024,
      retention: { maxParts: 2, intervalMs: 20 },
    });
    await q.pushBatch(Array.from({ length: 200 }, (_, i) => `message ${i} ${"x".repeat(40)}`));
    await q.produce(["keyed"], { key: "k1" });
    await q.produce(["later"], { delayMs: 30 });
    await sleep(150); // the delayed one moves; retention rounds run
    const c = await QueueConsumer.open("q", "c", { driver });
    await c.read({ max: 5 });
    await c.commit();
    const s = await openSharedConsumer("q", "s", { driver });
    const leased = await s.poll({ max: 3 });
    for (const m of leased) await s.ack(m);
    await s.close();
    await c.close();
    await q.close();
    await purgeQueue(driver, "q");

    const ops = new Set(writes.map((w) => `${w.op} ${w.path.replace(/q-\d+\//, "q-N/")}`));
    // Every kind of file was written (so the check below covers them all).
    for (const expected of [
      "append q-N/q_queue",
      "replace q-N/q_info_push",
      "replace q_info_queue",
      "append q-N/q_index",
      "writeAtomic q-N/q_dict",
      "append q_info_delayed",
      "append q_info_idem",
      "append q_info_pruned",
      "replace q_info_pop_c",
      "writeAtomic q_info_shared_s",
      "append q_info_shlog_s",
      "replace q_info_pop_s",
    ]) {
      expect(ops, expected).toContain(expected);
    }
    const wrong = writes.filter((w) => w.fence !== holderOf(w.path));
    expect(wrong).toEqual([]);
  }, 30_000);

  it("a write refused with E_FENCED stops the writer as a lost lock: nothing acknowledged, the part not cut", async () => {
    const { driver, writes, refuseAppends } = recordingDriver();
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.push("before");
    refuseAppends((path) => path.endsWith("/q_queue"));
    await expect(q.push("refused")).rejects.toMatchObject({ code: "E_FENCED" });
    await expect(q.push("after")).rejects.toMatchObject({ code: "E_FENCED" });
    // No truncate after the refusal: the file is another writer's now.
    const refusedAt = writes.findLastIndex((w) => w.op === "append" && w.path.endsWith("/q_queue"));
    expect(writes.slice(refusedAt + 1).filter((w) => w.op === "truncate")).toEqual([]);
    refuseAppends(undefined);
    await q.close();
    const c = await QueueConsumer.open("q", "c", { driver });
    expect((await c.read({ max: 10 })).map((m) => m.data)).toEqual(["before"]);
    await c.close();
  });
});
