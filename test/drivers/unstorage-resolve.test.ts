import { readdir } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { resolveStorageDriver } from "../../adapters/storage";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-resolve-");

describe("resolveStorageDriver", () => {
  it("maps paths, fs: and file: to the fs driver", async () => {
    for (const spec of [(dir: string) => dir, (dir: string) => `fs:${dir}`, (dir: string) => pathToFileURL(dir).href]) {
      const dir = await freshDir();
      const driver = await resolveStorageDriver(spec(dir));
      expect(driver.name).toBe("fs");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push("x");
      await q.close();
      expect(await readdir(dir)).toContain("q_info_queue");
    }
  });

  it("maps memory: to the memory driver, shared by name", async () => {
    expect((await resolveStorageDriver("memory:")).name).toBe("memory");
    const a = await resolveStorageDriver("memory:shared-resolve");
    const q = await QueueWriter.open("q", { driver: a, durability: "none" });
    await q.push("hello");
    await q.close();
    const c = await QueueConsumer.open("q", "c", { driver: await resolveStorageDriver("memory:shared-resolve") });
    expect((await c.read()).map((m) => m.data)).toEqual(["hello"]);
    await c.close();
  });

  it("maps unstorage-fs: and unstorage-memory: to the unstorage driver", async () => {
    const dir = await freshDir();
    for (const spec of [`unstorage-fs:${dir}`, "unstorage-memory:"]) {
      const driver = await resolveStorageDriver(spec);
      expect(driver.name).toBe("unstorage");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.pushBatch(["a", "b"]);
      await q.close();
      const c = await QueueConsumer.open("q", "c", { driver });
      expect((await c.read()).map((m) => m.data)).toEqual(["a", "b"]);
      await c.close();
      await driver.dispose?.();
    }
    expect((await readdir(join(dir, "q-0"))).sort()).toEqual(["q_index", "q_index~000000000000024", "q_info_push", "q_queue"]);
  });

  it("takes lease and instances in unstorage-fs: and redis:// specs, refuses other values, and lets the registration go on dispose", async () => {
    const dir = await freshDir();
    for (const [bad, says] of [
      [`unstorage-fs:${dir}?instances=two`, 'instances="two"; use instances=one (the default) or instances=many'],
      [`unstorage-fs:${dir}?lease=soon`, 'lease="soon" is not a whole number of ms'],
      [`unstorage-fs:${dir}?colour=red`, 'unknown parameter "colour"; use lease, instances'],
      ["redis://127.0.0.1:1/0?instances=all", 'instances="all"; use instances=one'],
    ]) {
      const error = await resolveStorageDriver(bad!).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "E_OPTION" });
      expect((error as Error).message).toContain(says);
    }
    const driver = await resolveStorageDriver(`unstorage-fs:${dir}?lease=500&instances=one`);
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.push("x");
    expect(await readdir(dir)).toContain("~instance");
    await q.close();
    await driver.dispose?.();
    expect(await readdir(dir)).not.toContain("~instance");
  });

  it("passes a driver through and explains a spec it does not know", async () => {
    const driver = memoryDriver({});
    expect(await resolveStorageDriver(driver)).toBe(driver);
    for (const bad of ["s3://bucket", "", "fs:", {} as never]) {
      const error = await resolveStorageDriver(bad).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "E_OPTION" });
      expect((error as Error).message).toContain("redis://");
    }
  });
});
