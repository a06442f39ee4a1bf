/**
 * Where the default storage comes from: one function (`resolveDriver`) and one file of
 * defaults, for the server, the CLI, the Node entry and Nitro; the runtime takes a driver only.
 */
import { writeFileSync } from "node:fs";
import { join, resolve } from "pathe";
import { createStorage } from "unstorage";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import unstorageDriver from "../../adapters/drivers/unstorage";
import vQueue, { setupVQueue, useVQueue, type NitroLike } from "../../adapters/nitro";
import { DEFAULT_DIR, NITRO_DEFAULT_DIR, fsDataDir, resolveDriver, resolveStorageDriver, storageNeedsEnv } from "../../adapters/storage";
import { createQueueHandler } from "../../runtime/index";
import { VQueueError } from "../../src/core/errors";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

describe("resolveDriver", () => {
  it("gives the driver as is, else the storage spec, else the fs driver on dir or the default", async () => {
    const driver = memoryDriver({});
    expect(await resolveDriver({ driver, storage: "memory:", dir: "./x" })).toBe(driver);
    expect((await resolveDriver({ storage: "memory:", dir: "./x" })).name).toBe("memory");
    expect((await resolveDriver({ dir: "./x" })).storageKey).toBe(`fs:${resolve("./x")}`);
    // Empty counts as not given: an env variable can be emptied, not removed.
    for (const source of [{}, { dir: "", storage: "" }]) {
      expect((await resolveDriver(source)).storageKey).toBe(`fs:${resolve(DEFAULT_DIR)}`);
      expect((await resolveDriver(source, NITRO_DEFAULT_DIR)).storageKey).toBe(`fs:${resolve(NITRO_DEFAULT_DIR)}`);
    }
    expect(fsDataDir({})).toBe(DEFAULT_DIR);
    expect(fsDataDir({ dir: "./x" })).toBe("./x");
    expect(fsDataDir({ storage: "memory:" })).toBeUndefined();
  });

  it("is needed: the runtime has no default storage and says so", () => {
    const error = (() => {
      try {
        createQueueHandler({ durability: "none" });
      } catch (error) {
        return error;
      }
    })();
    expect(error).toMatchObject({ code: "E_OPTION", message: expect.stringMatching(/^Missing driver: pass one/) });
  });
});

describe("option errors", () => {
  it("are E_OPTION, saying what was wrong and what is allowed, with no prefix in the message", () => {
    const thrown = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        return error as VQueueError;
      }
      throw new Error("did not throw");
    };
    const driver = memoryDriver({});
    expect(thrown(() => createQueueHandler({ driver, durability: "always" as never }))).toMatchObject({
      code: "E_OPTION",
      message: 'Invalid durability "always": use "fsync", "interval" or "none".',
    });
    expect(thrown(() => createQueueHandler({ driver, start: "middle" as never })).message).toBe('Invalid start "middle": use "earliest" or "latest".');
    expect(thrown(() => createQueueHandler({ driver, maxConsumers: 0, limits: { maxMessages: -1 } })).message).toBe(
      "3 problems in the options:\n  - Invalid maxConsumers 0: use an integer from 1 up.\n  - Invalid limits.maxMessages -1: use an integer from 0 up.\n  - Invalid limits.defaultMessages 1: use 1..maxMessages (-1).",
    );
    expect(thrown(() => createQueueHandler({ driver, auth: { enabled: true } })).message).toBe("Invalid auth: enabled without users, nobody could log in.");
    expect(thrown(() => vQueue({ durability: "always" as never }))).toMatchObject({
      code: "E_OPTION",
      message: expect.stringContaining('Invalid durability "always"'),
    });
    expect(thrown(() => vQueue({ name: "a b" })).code).toBe("E_OPTION");
    expect(thrown(() => useVQueue("absent")).code).toBe("E_OPTION");
    expect(new VQueueError("E_IO", "disk full").message).toBe("disk full");
  });
});

describe("the Nitro module", () => {
  it("puts its default dir into the runtime config, and opens an instance on a storage spec", async () => {
    const nitro: NitroLike = { options: { handlers: [], plugins: [], runtimeConfig: {} } };
    vQueue({ name: "resolve-test" }).setup(nitro);
    expect((nitro.options.runtimeConfig.vQueue as Record<string, { dir: string }>)["resolve-test"]!.dir).toBe(NITRO_DEFAULT_DIR);
    const instance = setupVQueue("resolve-test", { storage: "memory:", durability: "none" });
    try {
      expect((await instance.push("q", ["a"])).count).toBe(1);
      expect((await instance.fetch("/health")).status).toBe(200);
    } finally {
      await instance.close();
    }
  });
});

describe("durable-object: storage (Cloudflare)", () => {
  it("is refused outside workerd and when it names no binding, saying what to use (E_OPTION)", async () => {
    await expect(resolveStorageDriver("durable-object:VQUEUE", { env: {} })).rejects.toMatchObject({
      code: "E_OPTION",
      message: expect.stringContaining("Durable Objects are reachable only from a Cloudflare Worker (workerd)"),
    });
    await expect(resolveDriver({ storage: "durable-object:" })).rejects.toThrow(/it names no binding; use durable-object:BINDING/);
    await expect(resolveDriver({ storage: "durable-object:my-binding" })).rejects.toThrow(/"my-binding" is not binding/);
    expect(storageNeedsEnv(" durable-object:VQUEUE")).toBe(true);
    expect(storageNeedsEnv("memory:")).toBe(false);
  });

  it("makes the module export VQueueObject from the entry of a Worker preset's build, and only there", () => {
    const nitroOn = (preset: string, dev = false): NitroLike => ({
      options: { preset, dev, entry: "/app/presets/cloudflare/runtime/cloudflare-module.mjs", handlers: [], plugins: [], runtimeConfig: {} },
    });
    const worker = nitroOn("cloudflare-module");
    vQueue().setup(worker);
    vQueue({ name: "second" }).setup(worker);
    expect(worker.options.entry).toBe("#v-queue/cloudflare-entry");
    expect(worker.options.virtual!["#v-queue/cloudflare-entry"]).toBe(
      [
        'export * from "/app/presets/cloudflare/runtime/cloudflare-module.mjs";',
        'export { default } from "/app/presets/cloudflare/runtime/cloudflare-module.mjs";',
        'export { VQueueObject } from "v-queue/cloudflare";',
      ].join("\n"),
    );
    for (const other of [nitroOn("node-server"), nitroOn("cloudflare-pages"), nitroOn("cloudflare-module", true)]) {
      vQueue().setup(other);
      expect(other.options.entry).toBe("/app/presets/cloudflare/runtime/cloudflare-module.mjs");
      expect(other.options.virtual?.["#v-queue/cloudflare-entry"]).toBeUndefined();
    }
  });
});

describe("the Nitro module's runtime config from env variables", () => {
  it("parses nested retention values given as strings (Nitro v3 passes env overrides raw), as it does limits", async () => {
    const instance = setupVQueue("retention-env-test", {
      storage: "memory:",
      durability: "none",
      limits: { maxBatchMessages: "5" as never },
      retention: { maxParts: "3" as never, deleteConsumed: "true" as never },
      queues: { orders: { retention: { maxAgeMs: "86400000" as never } } },
    });
    try {
      expect((await instance.push("q", ["a"])).count).toBe(1);
    } finally {
      await instance.close();
    }
  });
});

describe("storage failures", () => {
  const tempDir = useTempDirs("vq-io-");

  it("leave every driver as E_IO with the storage's own error (and code) as cause", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "file"), "x");
    const fs = fsDriver({ dir: join(root, "file", "sub") });
    expect(await fs.openRecord("q_info_queue", { create: true }).catch((e: unknown) => e)).toMatchObject({
      code: "E_IO",
      message: expect.stringMatching(/^The fs driver failed: ENOTDIR/),
      cause: { code: "ENOTDIR" },
    });

    const memory = memoryDriver({});
    expect(await memory.openLog("q-0/q_queue", { create: true }).catch((e: unknown) => e)).toMatchObject({ code: "E_IO", cause: { code: "ENOENT" } });

    const broken = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:6379"), { code: "ECONNREFUSED" });
    const storage = createStorage();
    storage.getItemRaw = () => Promise.reject(broken);
    const error = await QueueWriter.open("q", { driver: unstorageDriver({ storage }) }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "E_IO", message: "The unstorage driver failed: connect ECONNREFUSED 127.0.0.1:6379" });
    expect((error as Error).cause).toBe(broken);
  });
});
