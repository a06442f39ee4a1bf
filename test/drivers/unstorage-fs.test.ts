import { readdir, readFile } from "node:fs/promises";
import { join } from "pathe";
import { createStorage } from "unstorage";
import fsStorageDriver from "unstorage/drivers/fs";
import { describe, expect, it } from "vitest";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { QueueWriter } from "../../src/writer/writer";
import { describeEngineOnDriver } from "./engine-suite";
import { describeUnstorageDriver } from "./unstorage-suite";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-unstorage-fs-");
// A new storage object on the same directory each time, as another process would have.
const storageOn = (dir: string) => createStorage({ driver: fsStorageDriver({ base: dir }) });

describeEngineOnDriver("unstorage (fs)", async () => {
  const dir = await freshDir();
  return { driver: unstorageDriver({ storage: storageOn(dir) }), reopen: () => unstorageDriver({ storage: storageOn(dir) }) };
});

describeUnstorageDriver("fs", async () => {
  const dir = await freshDir();
  return { storage: storageOn(dir), reopenStorage: () => storageOn(dir) };
});

describe("unstorage driver over fs", () => {
  it("lays a queue out as files: the first chunk where the crate keeps the part, later chunks beside it", async () => {
    const dir = await freshDir();
    const q = await QueueWriter.open("orders", { driver: unstorageDriver({ storage: storageOn(dir), base: "vq" }), durability: "none" });
    await q.push("first");
    await q.push("second");
    expect((await readdir(join(dir, "vq"))).sort()).toEqual(["orders-0", "orders_info_queue", "orders_queue.lock", "~instance"]);
    expect((await readdir(join(dir, "vq/orders-0"))).sort()).toEqual(["orders_index", "orders_info_push", "orders_queue", "orders_queue~000000000000030"]);
    expect((await readFile(join(dir, "vq/orders-0/orders_queue"))).subarray(25).toString()).toBe("first");
    await q.close();
    expect(await readdir(join(dir, "vq"))).not.toContain("orders_queue.lock");
  });
});
