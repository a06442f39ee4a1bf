import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { describeEngineOnDriver } from "./engine-suite";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-fs-");

describeEngineOnDriver("fs", async () => {
  const dir = await freshDir();
  return { driver: fsDriver({ dir }), reopen: () => fsDriver({ dir }) };
});

// Small reads and writes run inline by default; the same suite with every call in the pool.
describeEngineOnDriver("fs, all I/O in the thread pool", async () => {
  const dir = await freshDir();
  return { driver: fsDriver({ dir, inlineIOBytes: 0 }), reopen: () => fsDriver({ dir, inlineIOBytes: 0 }) };
});

describe("fs driver", () => {
  it("checks inlineIOBytes", () => {
    expect(() => fsDriver({ inlineIOBytes: -1 })).toThrow(/inlineIOBytes must be an integer >= 0 \(got -1\)/);
    expect(() => fsDriver({ inlineIOBytes: 1.5 })).toThrow(expect.objectContaining({ code: "E_OPTION" }));
  });

  it("lays the queue out as the crate does, and removes its lock file on close", async () => {
    const dir = await freshDir();
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    await q.push("x");
    expect((await readdir(dir)).sort()).toEqual(["orders-0", "orders_info_queue", "orders_queue.lock"]);
    // The crate's two files, and v-queue's index beside them (the crate ignores it).
    expect((await readdir(join(dir, "orders-0"))).sort()).toEqual(["orders_index", "orders_info_push", "orders_queue"]);
    await q.close();
    expect((await readdir(dir)).sort()).toEqual(["orders-0", "orders_info_queue"]);
    expect(await readFile(join(dir, "orders_info_queue"), "utf8")).toBe("orders;0;1469960409\n".replace("1469960409", String(crcLine("orders;0;"))));
  });

  it("takes over the crate's empty lock file", async () => {
    const dir = await freshDir();
    const { writeFile } = await import("node:fs/promises");
    await writeFile(join(dir, "orders_queue.lock"), "");
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    await q.close();
  });

  it("wakes a consumer through fs.watch when another driver instance appends, long before a poll", async () => {
    const dir = await freshDir();
    const writer = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    // The same directory through a symlink: another storage key, so no in-process wake-up,
    // as if the consumer were in another process.
    const link = join(await freshDir(), "link");
    await symlink(dir, link);
    const consumer = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir: link }), pollIntervalMs: 600_000 });
    const started = performance.now();
    const waiting = consumer.wait({ timeoutMs: WAKE_TIMEOUT_MS });
    setTimeout(() => void writer.push("watched"), 50);
    expect(await waiting).toBe(true);
    expectEndedEarly(started);
    expect((await consumer.read()).map((m) => m.data)).toEqual(["watched"]);
    await consumer.close();
    await writer.close();
  });

  // Node's fs/promises runs on libuv's pool of UV_THREADPOOL_SIZE threads, which this test fills;
  // Bun's and Deno's are their own, of other sizes.
  it.skipIf(currentRuntime !== "node")(
    "reads a small record without the thread pool (a sample of 10,000 position files costs no pool trips), a larger one through it",
    async () => {
      const dir = await freshDir();
      const driver = fsDriver({ dir, inlineIOBytes: 1024 });
      await writeFile(join(dir, "small"), "q;c;0;12;3;1\n");
      await writeFile(join(dir, "large"), "x".repeat(2048));
      let large!: Promise<Uint8Array | undefined>;
      let small, missing, largeWhileBusy;
      await withPoolStuck(dir, async () => {
        large = driver.readRecord("large");
        small = await inTime(driver.readRecord("small").then((bytes) => bytes && new TextDecoder().decode(bytes)));
        missing = await inTime(driver.readRecord("missing"));
        largeWhileBusy = await inTime(large);
      });
      expect(small).toEqual({ value: "q;c;0;12;3;1\n" });
      expect(missing).toEqual({ value: undefined });
      expect(largeWhileBusy).toBe("pool busy");
      expect((await large)?.length).toBe(2048);
    },
  );

  it.skipIf(currentRuntime !== "node")(
    "by default appends a writer's 1 MiB batch, reads a consumer's 1 MiB chunk and a log's size without the thread pool (its handoff costs more than the copy)",
    async () => {
      const dir = await freshDir();
      const driver = fsDriver({ dir });
      const log = (await driver.openLog("log", { create: true }))!;
      const chunk = new Uint8Array(1 << 20).map((_, i) => i % 251);
      let appended, read, size;
      await withPoolStuck(dir, async () => {
        appended = await inTime(log.append(0, chunk));
        read = await inTime(log.read(0, chunk.length).then((bytes) => Buffer.compare(bytes, chunk) === 0));
        size = await inTime(log.size());
      });
      expect(appended).toEqual({ value: undefined });
      expect(read).toEqual({ value: true });
      expect(size).toEqual({ value: chunk.length });
      await log.close();
    },
  );

  it.skipIf(currentRuntime !== "node")(
    "by default opens and closes files without the thread pool: a consumer's seek by sequence or by time makes no pool trip once the parts are listed",
    async () => {
      const dir = await freshDir();
      const driver = fsDriver({ dir });
      const q = await QueueWriter.open("q", { driver, maxPartBytes: 4096, indexInterval: 10 });
      for (let i = 0; i < 5; i++) await q.pushBatch(Array.from({ length: 40 }, (_, j) => `m${i * 40 + j}`.padEnd(60, ".")));
      const parts = q.position.part + 1;
      await q.close();
      expect(parts).toBeGreaterThan(2);
      // syncCommits: an fsync of the saved position always goes through the pool (as durable as every commit).
      const c = await QueueConsumer.open("q", "c", { driver, syncCommits: false });
      await c.seek({ time: Date.now() - 60_000 }); // lists the parts (a directory read goes through the pool)
      const pooled = fsDriver({ dir, inlineIOBytes: 0 });
      let opened, bySeq, byTime, pooledOpen!: Promise<unknown>;
      await withPoolStuck(dir, async () => {
        opened = await inTime(driver.openLog("q-1/q_queue", { create: false }).then(async (log) => (await log!.close(), "opened and closed")));
        bySeq = await inTime(c.seek({ part: parts - 1, seq: 3 }));
        byTime = await inTime(c.seek({ time: Date.now() - 60_000 }));
        pooledOpen = pooled.openLog("q-1/q_queue", { create: false }).then((log) => log?.close());
        expect(await inTime(pooledOpen)).toBe("pool busy"); // inlineIOBytes: 0 opens in the pool
      });
      await pooledOpen;
      expect(opened).toEqual({ value: "opened and closed" });
      expect(bySeq).toEqual({ value: expect.stringMatching(new RegExp(`^${parts - 1}\\.`)) });
      expect(byTime).toEqual({ value: "0.0.0" });
      expect((await c.read({ max: 1 }))[0]?.data).toBe("m0".padEnd(60, "."));
      await c.close();
    },
  );

  it("refuses a closed file's calls, and closes a file only once its calls in the pool are done", async () => {
    const dir = await freshDir();
    const log = (await fsDriver({ dir, inlineIOBytes: 0 }).openLog("log", { create: true }))!;
    const data = new Uint8Array(64 * 1024).fill(7);
    const appended = log.append(0, data);
    await log.close(); // while the append is in the pool: it completes into this file, not into a reused descriptor
    await appended;
    const again = (await fsDriver({ dir }).openLog("log", { create: false }))!;
    expect(Buffer.compare(await again.read(0, data.length), data)).toBe(0);
    await again.close();
    await expect(again.read(0, 1)).rejects.toMatchObject({ code: "E_IO" });
    await expect(log.size()).rejects.toMatchObject({ code: "E_IO" });
    await again.close(); // a second close is harmless
  });

  it("never touches a path outside its directory", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    await expect(driver.openLog("../escape", { create: true })).rejects.toMatchObject({ code: "E_NAME" });
    await expect(driver.openRecord("../escape", { create: true })).rejects.toMatchObject({ code: "E_NAME" });
    await expect(driver.list("/etc")).rejects.toMatchObject({ code: "E_NAME" });
  });
});

import { crc32Ascii } from "../../src/format/crc32";
import { currentRuntime } from "../helpers/runtime";
import { useTempDirs } from "../helpers/tmp";
/** Opens and closes a FIFO for writing once its reader is there (ENXIO before): that reader gets end of file. */
/** Runs `body` while every thread of libuv's pool is stuck in open() of a FIFO no one writes to (a pool has at most 1,024 threads; 4 unless UV_THREADPOOL_SIZE says more). */
async function withPoolStuck(dir: string, body: () => Promise<void>): Promise<void> {
  const threads = Math.min(1024, Number(process.env.UV_THREADPOOL_SIZE) || 4);
  const fifos = Array.from({ length: threads }, (_, i) => join(dir, `fifo${i}`));
  execFileSync("mkfifo", fifos);
  const stuck = fifos.map((fifo) => readFile(fifo));
  try {
    await body();
  } finally {
    // Each FIFO given a writer that closes at once: the pool is free again.
    for (const fifo of fifos) await openWriterOnce(fifo);
    await Promise.all(stuck);
  }
}

/** `{ value }` once `call` settles, or "pool busy" if it has not after 2 s (it waits for a thread of the pool). */
function inTime<T>(call: Promise<T>): Promise<{ value: T } | "pool busy"> {
  return Promise.race([call.then((value) => ({ value })), sleep(2000).then(() => "pool busy" as const)]);
}

async function openWriterOnce(fifo: string): Promise<void> {
  for (;;) {
    try {
      return closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENXIO") throw error;
      await sleep(10);
    }
  }
}

import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
function crcLine(text: string): number {
  return crc32Ascii(text);
}
