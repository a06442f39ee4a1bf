import { readdir, readFile, symlink } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumer";
import { QueueWriter } from "../../src/writer";
import { describeEngineOnDriver } from "./engine-suite";

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

  it("never touches a path outside its directory", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    await expect(driver.openLog("../escape", { create: true })).rejects.toMatchObject({ code: "E_NAME" });
    await expect(driver.openRecord("../escape", { create: true })).rejects.toMatchObject({ code: "E_NAME" });
    await expect(driver.list("/etc")).rejects.toMatchObject({ code: "E_NAME" });
  });
});

import { crc32Ascii } from "../../src/crc32";
import { useTempDirs } from "../helpers/tmp";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
function crcLine(text: string): number {
  return crc32Ascii(text);
}
