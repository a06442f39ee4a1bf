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
import { DEFAULT_DIR, NITRO_DEFAULT_DIR, fsDataDir, resolveDriver } from "../../adapters/storage";
import { createQueueHandler } from "../../runtime/index";
import { VQueueError } from "../../src/errors";
import { QueueWriter } from "../../src/writer";
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
    expect(thrown(() => createQueueHandler({ driver, durability: "always" as never }))).toMatchObject({ code: "E_OPTION", message: 'Invalid durability "always": use "fsync", "interval" or "none".' });
    expect(thrown(() => createQueueHandler({ driver, start: "middle" as never })).message).toBe('Invalid start "middle": use "earliest" or "latest".');
    expect(thrown(() => createQueueHandler({ driver, maxConsumers: 0, limits: { maxMessages: -1 } })).message).toBe(
      "3 problems in the options:\n  - Invalid maxConsumers 0: use an integer from 1 up.\n  - Invalid limits.maxMessages -1: use an integer from 0 up.\n  - Invalid limits.defaultMessages 1: use 1..maxMessages (-1).",
    );
    expect(thrown(() => createQueueHandler({ driver, auth: { enabled: true } })).message).toBe("Invalid auth: enabled without users, nobody could log in.");
    expect(thrown(() => vQueue({ durability: "always" as never }))).toMatchObject({ code: "E_OPTION", message: expect.stringContaining('Invalid durability "always"') });
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
    expect(await fs.openRecord("q_info_queue", { create: true }).catch((e: unknown) => e)).toMatchObject({ code: "E_IO", message: expect.stringMatching(/^The fs driver failed: ENOTDIR/), cause: { code: "ENOTDIR" } });

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
