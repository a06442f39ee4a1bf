import { spawn } from "node:child_process";
import { resolve } from "pathe";
import Redis from "ioredis";
import { createStorage, type Storage } from "unstorage";
import redisStorageDriver from "unstorage/drivers/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { resolveStorageDriver } from "../../adapters/storage";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { currentRuntime } from "../helpers/runtime";
import { describeEngineOnDriver } from "./engine-suite";
import { describeUnstorageDriver } from "./unstorage-suite";
import { sleep } from "../helpers/sleep";

const available = redisTestsRun("unstorage driver over redis");

describe.skipIf(!available)("over a real redis-server", () => {
  let server: RedisServer;
  const storages: Storage[] = [];
  let n = 0;
  const storageOn = () => {
    const storage = createStorage({ driver: redisStorageDriver({ url: server.url, scanCount: 1000, lazyConnect: true }) });
    storages.push(storage);
    return storage;
  };
  const disposeAll = async () => {
    for (const storage of storages.splice(0)) await storage.dispose();
  };
  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    await disposeAll();
    await server?.stop();
  });

  // Each test gets its own key prefix on the one server; a reopen is a new connection.
  describeEngineOnDriver(
    "unstorage (redis)",
    () => {
      const base = `engine-${++n}`;
      return { driver: unstorageDriver({ storage: storageOn(), base }), reopen: () => unstorageDriver({ storage: storageOn(), base }) };
    },
    disposeAll,
  );

  describeUnstorageDriver(
    "redis",
    async () => {
      const base = `suite-${++n}`;
      const prefixed = (storage: Storage) => prefixOf(storage, base);
      return { storage: prefixed(storageOn()), reopenStorage: () => prefixed(storageOn()) };
    },
    disposeAll,
  );

  describe("unstorage driver over redis", () => {
    it("stores chunks as base64 strings (unstorage 1.x has no raw Redis values)", async () => {
      const driver = unstorageDriver({ storage: storageOn(), base: "b64" });
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push(new Uint8Array([0, 1, 0xfe, 0xff]));
      await q.close();
      const redis = new Redis(server.url);
      try {
        const stored = await redis.get("b64:q-0:q_queue");
        expect(stored).toMatch(/^base64:/);
        expect(Buffer.from(stored!.slice(7), "base64").subarray(25)).toEqual(Buffer.from([0, 1, 0xfe, 0xff]));
        expect(await redis.get("b64:q_info_queue")).toMatch(/^base64:/);
      } finally {
        redis.disconnect();
      }
    });

    it("is what resolveStorageDriver gives for a redis:// URL, under the base it names", async () => {
      const driver = await resolveStorageDriver(`${server.url}?base=resolved`);
      expect(driver.name).toBe("unstorage");
      const q = await QueueWriter.open("q", { driver, durability: "none" });
      await q.push("via-url");
      await q.close();
      const other = await resolveStorageDriver(server.url); // default base "vq": another namespace
      await expect(QueueConsumer.open("q", "c", { driver: other })).rejects.toMatchObject({ code: "E_NOT_FOUND" });
      const c = await QueueConsumer.open("q", "c", { driver });
      expect((await c.read()).map((m) => m.data)).toEqual(["via-url"]);
      await c.close();
      await driver.dispose?.();
      await other.dispose?.();
      const redis = new Redis(server.url);
      try {
        expect((await redis.keys("resolved:*")).sort()).toEqual([
          "resolved:q-0:q_index",
          "resolved:q-0:q_index~000000000000024",
          "resolved:q-0:q_info_push",
          "resolved:q-0:q_queue",
          "resolved:q_info_pop_c",
          "resolved:q_info_queue",
        ]);
      } finally {
        redis.disconnect();
      }
    });

    it("resumes every consumer exactly after redis-server restarts (AOF)", async () => {
      let driver = unstorageDriver({ storage: storageOn(), base: "restart" });
      const q = await QueueWriter.open("jobs", { driver, durability: "fsync", maxPartBytes: 4000 });
      await q.pushBatch(Array.from({ length: 300 }, (_, i) => `job-${i}`));
      const commits = { a: 0, b: 1, c: 150, d: 299, e: 300 };
      for (const [name, count] of Object.entries(commits)) {
        const c = await QueueConsumer.open("jobs", name, { driver });
        let read = 0;
        while (read < count) {
          read += (await c.read({ max: Math.min(64, count - read) })).length;
          await c.commit();
        }
        await c.read({ max: 5 }); // handed out, never committed
        await c.close();
      }
      await q.close();
      await disposeAll();
      await server.restart();
      driver = unstorageDriver({ storage: storageOn(), base: "restart" });
      const writer = await QueueWriter.open("jobs", { driver, durability: "fsync" });
      await writer.push("job-300");
      for (const [name, count] of Object.entries(commits)) {
        const c = await QueueConsumer.open("jobs", name, { driver, create: false });
        const got = await c.read({ max: 1000 });
        expect(
          got.map((m) => m.data),
          name,
        ).toEqual(Array.from({ length: 301 - count }, (_, i) => `job-${i + count}`));
        await c.close();
      }
      await writer.close();
    }, 30_000);

    // The child is Node's `-e` with a TypeScript loader, which Bun accepts and Deno does not.
    it.skipIf(currentRuntime === "deno")(
      "holds a writer lock across processes, and frees it once a killed holder's lease runs out",
      async () => {
        const module = resolve(import.meta.dirname, "../../adapters/drivers/unstorage.ts");
        const code = `
        // jiti wraps a TypeScript module's exports in "default" when imported from native ESM.
        const unwrap = (m) => (m && typeof m === "object" && "default" in m && Object.keys(m).length === 1 ? unwrap(m.default) : m);
        const unstorageDriver = unwrap(await import(${JSON.stringify(module)}));
        const { QueueWriter } = unwrap(await import(${JSON.stringify(resolve(import.meta.dirname, "../../src/writer/writer.ts"))}));
        const { createStorage } = await import("unstorage");
        const redisDriver = (await import("unstorage/drivers/redis")).default;
        const storage = createStorage({ driver: redisDriver({ url: ${JSON.stringify(server.url)} }) });
        const q = await QueueWriter.open("held", { driver: unstorageDriver({ storage, base: "locks", lockLeaseMs: 2000, instances: "many" }), durability: "none" });
        await q.pushBatch(["from-child-1", "from-child-2"]);
        console.log("ready");
        setInterval(() => {}, 1000);
      `;
        const child = spawn(process.execPath, ["--import", "jiti/register", "--input-type=module", "-e", code], { stdio: ["ignore", "pipe", "pipe"] });
        let err = "";
        child.stderr!.on("data", (chunk: Buffer) => (err += chunk));
        await new Promise<void>((ok, fail) => {
          child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && ok());
          child.once("exit", () => fail(new Error(`child exited: ${err}`)));
        });
        // A lease long enough that the child's refresh and the checks after the kill are not outrun on a loaded machine.
        // Two instances at once (instances: "many"): the lock itself is what is tested here; one instance per storage, in test/instances/unfenced-instances.test.ts.
        const driver = unstorageDriver({ storage: storageOn(), base: "locks", lockLeaseMs: 2000, instances: "many" });
        await sleep(2200); // past one lease: the child refreshes it
        await expect(QueueWriter.open("held", { driver })).rejects.toMatchObject({ code: "E_LOCKED" });
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGKILL");
        await exited;
        await expect(QueueWriter.open("held", { driver })).rejects.toMatchObject({ code: "E_LOCKED" });
        await sleep(2100);
        const q = await QueueWriter.open("held", { driver, durability: "none" });
        await q.push("from-parent");
        await q.close();
        const c = await QueueConsumer.open("held", "c", { driver });
        expect((await c.read({ max: 10 })).map((m) => m.data)).toEqual(["from-child-1", "from-child-2", "from-parent"]);
        await c.close();
      },
      30_000,
    );
  });
});

/** The storage seen under a key prefix (keys passed and returned without it), as prefixStorage does. */
function prefixOf(storage: Storage, base: string) {
  const p = (key = "") => (key ? `${base}:${key}` : base);
  const strip = (key: string) => key.slice(base.length + 1);
  return {
    hasItem: (key: string) => storage.hasItem(p(key)),
    getItemRaw: (key: string) => storage.getItemRaw(p(key)),
    setItemRaw: (key: string, value: unknown) => storage.setItemRaw(p(key), value),
    removeItem: (key: string) => storage.removeItem(p(key)),
    getKeys: async (key?: string) => (await storage.getKeys(p(key))).map(strip),
  } as Pick<Storage, "hasItem" | "getItemRaw" | "setItemRaw" | "removeItem" | "getKeys">;
}
