import { readdirSync, watch } from "node:fs";
import { symlink } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueDriver } from "../../src/core/driver";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-fds-");
/** Descriptors this process has open now (Linux). */
const openFds = () => readdirSync("/proc/self/fd").length;

describe.runIf(process.platform === "linux")("file descriptors", () => {
  it("300 open consumers of one queue hold a handful of descriptors, not several each", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("orders", { driver });
    await q.pushBatch(["a", "b", "c"]);
    const before = openFds();
    const consumers = [];
    for (let i = 0; i < 300; i++) consumers.push(await QueueConsumer.open("orders", `c${i}`, { driver }));
    for (const c of consumers) expect((await c.read()).map((m) => m.data)).toEqual(["a", "b", "c"]);
    await Promise.all(consumers.map((c) => c.commit()));
    // A consumer keeps its position file open while it commits, and lets it go a second after.
    await sleep(1200);
    expect(openFds() - before).toBeLessThan(20);
    await Promise.all(consumers.map((c) => c.close()));
    expect(openFds()).toBeLessThanOrEqual(before);
    await q.close();
  });

  it("no descriptor outlives a consumer that followed a writer in another process through many parts", async () => {
    const dir = await freshDir();
    const link = join(await freshDir(), "link");
    await symlink(dir, link);
    const writer = await QueueWriter.open("orders", { driver: fsDriver({ dir }), maxPartBytes: 1024, durability: "none" });
    await writer.push("first");
    // libuv opens one inotify descriptor for the first fs.watch of the process, and keeps it.
    watch(dir).close();
    const before = openFds();
    // Another storage key: it polls and watches, and its refreshes race its reads. Opens are
    // slowed down so that they overlap, and every handle is counted until it is closed.
    const base = fsDriver({ dir: link });
    let unclosed = 0;
    const counted = async <T extends { close(): Promise<void> }>(open: () => Promise<T | undefined>): Promise<T | undefined> => {
      await sleep(3);
      const handle = await open();
      if (!handle) return handle;
      unclosed++;
      let closed = false;
      return { ...handle, close: () => (closed ? Promise.resolve() : ((closed = true), unclosed--, handle.close())) };
    };
    const driver: QueueDriver = {
      ...base,
      openLog: (path, options) => counted(() => base.openLog(path, options)),
      openRecord: (path, options) => counted(() => base.openRecord(path, options)),
    };
    const consumer = await QueueConsumer.open("orders", "c", { driver, pollIntervalMs: 1 });
    const seen: unknown[] = [];
    const reading = (async () => {
      while (seen.length < 401) {
        const batch = await consumer.read({ max: 7 });
        seen.push(...batch.map((m) => m.data));
        // Short waits: a wait that times out leaves its last check running into the next read.
        if (batch.length === 0) await consumer.wait({ timeoutMs: 2 });
      }
    })();
    for (let i = 0; i < 400; i++) {
      await writer.push(`m${i}`.padEnd(40, "."));
      if (i % 50 === 0) await sleep(5);
    }
    await reading;
    expect(seen).toHaveLength(401);
    expect(writer.position.part).toBeGreaterThan(10);
    await consumer.close();
    expect(unclosed).toBe(0);
    expect(openFds()).toBeLessThanOrEqual(before);
    await writer.close();
  });
});
