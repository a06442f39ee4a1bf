/**
 * A produce-consume round trip on every storage, for the runtime suites (test/runtimes/_suite.ts):
 * the engine is plain TypeScript, so on Bun and Deno what can differ is each storage's I/O (files,
 * sockets, unstorage's drivers). Each storage: an ordered consumer reads what a writer pushed (text
 * and bytes), its commit survives a reopen; a shared consumer leases, nacks and acks.
 */
import { createStorage } from "unstorage";
import unstorageFsDriver from "unstorage/drivers/fs";
import unstorageRedisDriver from "unstorage/drivers/redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import redisDriver from "../../adapters/drivers/redis";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { redisTestsRun, startRedisServer, type RedisServer } from "../helpers/redis";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-round-trip-");
const quiet = { onProblem: () => {} };
const bytes = new Uint8Array([0, 1, 2, 255]);

interface Storage {
  /** A driver on the storage, and a second one on the same storage (as another process would open it). */
  open(): Promise<{ driver: QueueDriver; reopen(): QueueDriver }>;
}

async function roundTrip({ driver, reopen }: { driver: QueueDriver; reopen(): QueueDriver }): Promise<void> {
  const writer = await QueueWriter.open("trip", { driver, ...quiet });
  await writer.push("first");
  await writer.pushBatch(["second", bytes]);
  await writer.close();

  const ordered = await QueueConsumer.open("trip", "reader", { driver, ...quiet });
  const read = await ordered.read({ max: 10 });
  expect(read.map((m) => m.data)).toEqual(["first", "second", bytes]);
  await ordered.commit();
  await ordered.close();
  // Another driver on the same storage sees the commit: nothing is left to read.
  const again = await QueueConsumer.open("trip", "reader", { driver: reopen(), ...quiet });
  expect(await again.read({ max: 10 })).toEqual([]);
  await again.close();

  const shared = await SharedConsumer.open("trip", "workers", { driver, ...quiet });
  const leased = await shared.poll({ max: 10, timeoutMs: 1000 });
  expect(leased.map((m) => m.data)).toEqual(["first", "second", bytes]);
  await shared.nack(leased[0]!, { delayMs: 0 });
  for (const m of leased.slice(1)) await shared.ack(m);
  const redelivered = await shared.poll({ max: 10, timeoutMs: 5000 });
  expect(redelivered.map((m) => m.data)).toEqual(["first"]);
  await shared.ack(redelivered[0]!);
  expect(shared.stats).toMatchObject({ inFlight: 0 });
  await shared.close();
}

const storages: Record<string, Storage> = {
  memory: {
    async open() {
      const name = `trip-${Math.random()}`;
      return { driver: memoryDriver({ name }), reopen: () => memoryDriver({ name }) };
    },
  },
  fs: {
    async open() {
      const dir = await freshDir();
      return { driver: fsDriver({ dir }), reopen: () => fsDriver({ dir }) };
    },
  },
  "unstorage (memory)": {
    async open() {
      const storage = createStorage();
      return { driver: unstorageDriver({ storage }), reopen: () => unstorageDriver({ storage }) };
    },
  },
  "unstorage (fs)": {
    async open() {
      const base = await freshDir();
      const on = () => unstorageDriver({ storage: createStorage({ driver: unstorageFsDriver({ base }) }) });
      return { driver: on(), reopen: on };
    },
  },
};

describe.each(Object.entries(storages))("a round trip on %s", (_name, storage) => {
  it("produces, reads and commits in order; leases, nacks and acks", async () => {
    await roundTrip(await storage.open());
  });
});

describe.skipIf(!redisTestsRun("round trip over redis"))("a round trip over a real redis-server", () => {
  let server: RedisServer;
  const drivers: QueueDriver[] = [];
  const unstorages: ReturnType<typeof createStorage>[] = [];
  beforeAll(async () => {
    server = await startRedisServer();
  }, 20_000);
  afterAll(async () => {
    for (const driver of drivers) await driver.dispose?.();
    for (const storage of unstorages) await storage.dispose();
    await server?.stop();
  });

  it("on the redis driver", async () => {
    const on = () => {
      const driver = redisDriver({ redis: server.url, prefix: "trip" });
      drivers.push(driver);
      return driver;
    };
    await roundTrip({ driver: on(), reopen: on });
  });

  it("on unstorage's redis driver", async () => {
    const on = () => {
      const storage = createStorage({ driver: unstorageRedisDriver({ url: server.url, base: "trip" }) });
      unstorages.push(storage);
      return unstorageDriver({ storage });
    };
    await roundTrip({ driver: on(), reopen: on });
  });
});
