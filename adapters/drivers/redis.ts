import { createRequire } from "node:module";
import type { Redis, RedisOptions } from "ioredis";
import { defineDriver, type QueueDriver } from "../../src/core/driver";
import { checkOption, integer, optionError, showValue } from "../../src/core/check";

import { RedisCalls, type RedisClient, type WaitReplicas } from "./utils/redis-client";
import { createLogHandle, createRecordHandle, fencedWrite, type FileRef } from "./utils/redis-handles";
import { DRIVER_NAME, queueKeys, queueOfPath, registryKey, toBuffer, toBytes } from "./utils/redis-keys";
import { acquireRedisLock } from "./utils/redis-lock";
import { createWatcher } from "./utils/redis-watch";

export type { WaitReplicas } from "./utils/redis-client";

export interface RedisDriverOptions {
  /**
   * The Redis to use: an ioredis `Redis` or `Cluster` instance, a `redis://` URL, or ioredis
   * `RedisOptions` (Sentinel included: `{ sentinels: [...], name: "mymaster" }`).
   */
  redis: RedisClient | string | RedisOptions;
  /**
   * Namespace of every key (`{<prefix>:<queue>}:...`), so that queues can share a Redis with
   * other data, or with other sets of queues.
   * @default "vq"
   */
  prefix?: string;
  /**
   * How long a writer or consumer lock stays valid without being refreshed (timed by Redis).
   * The holder refreshes it every third of this; a dead holder's lock is free after at most this.
   * @default 10000
   */
  lockLeaseMs?: number;
  /**
   * After each write, `WAIT replicas timeoutMs`: a write that fewer replicas acknowledged in
   * time fails (`E_IO`) and is not acknowledged to the producer. Off by default.
   */
  waitReplicas?: WaitReplicas;
  /**
   * Names the storage: driver instances with the same key in one process share handles and
   * wake consumers at once on a push.
   * @default the connection's host, port and db (the startup nodes of a cluster), and the prefix
   */
  key?: string;
  /**
   * Disconnect the client in `dispose()`.
   * @default true for a client the driver made (from a URL or options), false for one passed in
   */
  disposeClient?: boolean;
}

const PREFIX_RE = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Queues on Redis (standalone, Sentinel or Cluster) through ioredis. A part is one Redis string
 * (appends with APPEND, reads with GETRANGE, raw bytes); every key of a queue shares one hash
 * tag, so each write is one Lua script in one slot that also checks the writer's fence. Locks
 * are leases with an epoch from an INCR counter. See docs/storage.md#queues-on-redis.
 *
 * @example
 * import redisDriver from "v-queue/drivers/redis";
 * const queue = await openQueue("orders", { driver: redisDriver({ redis: "redis://127.0.0.1:6379" }) });
 */
const redisDriver = defineDriver((options: RedisDriverOptions): QueueDriver => {
  if (!options || options.redis === undefined || options.redis === null) {
    throw optionError(`Missing required option \`redis\` of the ${DRIVER_NAME} driver: an ioredis Redis or Cluster, a redis:// URL or ioredis options.`);
  }
  const prefix = options.prefix ?? "vq";
  const leaseMs = options.lockLeaseMs ?? 10_000;
  if (typeof prefix !== "string" || !PREFIX_RE.test(prefix)) {
    throw optionError(`Invalid prefix ${showValue(prefix)}: use 1 to 64 characters from A-Z a-z 0-9 . _ : - (no braces: the driver adds the hash tag).`);
  }
  checkOption("lockLeaseMs", leaseMs, integer(30));
  checkWaitReplicas(options.waitReplicas);
  if (options.disposeClient !== undefined)
    checkOption("disposeClient", options.disposeClient, (v, n) => (typeof v === "boolean" ? undefined : `Invalid ${n} ${showValue(v)}: use true or false.`));
  const made = !isClient(options.redis);
  if (keyPrefixOf(options.redis)) {
    throw optionError(
      `Invalid redis: the client has ioredis's keyPrefix ${showValue(keyPrefixOf(options.redis))}, which the driver's Lua scripts cannot follow (they name keys themselves). Use the driver's prefix option instead.`,
    );
  }
  const client = made ? makeClient(options.redis as string | RedisOptions) : (options.redis as RedisClient);
  // A client the driver owns: its connection errors come back as E_IO on the calls; unheard,
  // ioredis would print every failed reconnect (a failover prints dozens).
  if (options.disposeClient ?? made) client.on("error", () => {});
  const calls = new RedisCalls(client, options.waitReplicas);
  const registry = registryKey(prefix);
  const watcher = createWatcher(client);

  const ref = (path: string): FileRef => {
    const keys = queueKeys(prefix, queueOfPath(path));
    return { calls, keys, path, key: keys.file(path) };
  };
  /** Registers a queue that got a new file (after the file: see `forgetIfEmpty`). */
  const registered = async (queue: string, isNew: unknown) => {
    if (Number(isNew) === 1) await calls.call((c) => c.sadd(registry, queue));
  };
  /**
   * Drops a queue without files from the registry, then looks again: a file made meanwhile
   * (whose maker registers the queue after making it) puts it back, whichever came first.
   */
  const forgetIfEmpty = async (queue: string) => {
    const keys = queueKeys(prefix, queue);
    await calls.call((c) => c.srem(registry, queue));
    if ((await calls.call((c) => c.scard(keys.files))) > 0) await calls.call((c) => c.sadd(registry, queue));
  };
  const open = async (path: string, create: boolean): Promise<FileRef | undefined> => {
    const file = ref(path);
    if (create) await registered(file.keys.queue, await calls.write("vqCreate", file.key, file.keys.files, path));
    else if ((await calls.call((c) => c.exists(file.key))) === 0) return undefined;
    return file;
  };
  const namesOf = async (queue: string): Promise<string[]> => {
    const keys = queueKeys(prefix, queue);
    return (await calls.run("vqList", keys.files, keys.lock(""))) as string[];
  };

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${options.key ?? clientId(client)}:${prefix}`,
    async openLog(path, { create }) {
      const file = await open(path, create);
      return file && createLogHandle(file);
    },
    async openRecord(path, { create }) {
      const file = await open(path, create);
      return file && createRecordHandle(file);
    },
    async readRecord(path) {
      const value = await calls.call((c) => c.getBuffer(ref(path).key));
      return value ? toBytes(value) : undefined;
    },
    async writeAtomic(path, data, { fence }) {
      // One SET in one script: a reader gets the old value or the new one.
      const file = ref(path);
      await registered(file.keys.queue, await fencedWrite(file, fence, "vqReplace", toBuffer(data), file.keys.channel, path, "1"));
    },
    async list(dir) {
      const names = new Set<string>();
      const add = (name: string) => name && names.add(name.endsWith("/") ? name.slice(0, -1) : name);
      if (dir === "") {
        const queues = await calls.call((c) => c.smembers(registry));
        const listed = await Promise.all(queues.map(async (queue) => ({ queue, names: await namesOf(queue) })));
        for (const { queue, names: found } of listed) {
          if (found.length === 0) await forgetIfEmpty(queue);
          for (const name of found) add(name.split("/")[0]!);
        }
      } else {
        const under = `${dir}/`;
        for (const name of await namesOf(queueOfPath(dir))) if (name.startsWith(under)) add(name.slice(under.length).split("/")[0]!);
      }
      return [...names];
    },
    async mkdir(dir) {
      if (!dir) return;
      const keys = queueKeys(prefix, queueOfPath(dir));
      await registered(keys.queue, await calls.call((c) => c.sadd(keys.files, `${dir}/`)));
    },
    async remove(path, fence) {
      const file = ref(path);
      const left = await fencedWrite(file, fence, "vqRemove", path, file.keys.file(""));
      if (left === 0) await forgetIfEmpty(file.keys.queue);
    },
    lock(path) {
      return acquireRedisLock(calls, queueKeys(prefix, queueOfPath(path)), path, leaseMs);
    },
    async isLocked(path) {
      return (await calls.call((c) => c.exists(queueKeys(prefix, queueOfPath(path)).lock(path)))) === 1;
    },
    watch(dir, onChange) {
      // A directory of no queue (the base) has no channel: the consumers watch their part's too.
      const queue = queueOfPath(dir);
      return queue ? watcher.watch(queueKeys(prefix, queue).channel, () => onChange()) : undefined;
    },
    async dispose() {
      await watcher.close();
      // QUIT: the replies still in flight come back first; a client that cannot reach Redis is cut.
      if (options.disposeClient ?? made) await client.quit().catch(() => client.disconnect());
    },
  };
});

export default redisDriver;

// --- Internal helpers ---

function isClient(value: unknown): value is RedisClient {
  const v = value as { defineCommand?: unknown; pipeline?: unknown; isCluster?: unknown };
  return typeof v === "object" && v !== null && typeof v.defineCommand === "function" && typeof v.pipeline === "function" && typeof v.isCluster === "boolean";
}

/** ioredis's `keyPrefix` of a client (or of a cluster's nodes) or of options, if any. */
function keyPrefixOf(spec: unknown): string | undefined {
  const o = (isClient(spec) ? spec.options : spec) as { keyPrefix?: string; redisOptions?: { keyPrefix?: string } } | undefined;
  return typeof o === "object" && o ? o.keyPrefix || o.redisOptions?.keyPrefix || undefined : undefined;
}

function makeClient(spec: string | RedisOptions): RedisClient {
  const valid = typeof spec === "string" ? /^rediss?:\/\//i.test(spec) : typeof spec === "object";
  if (!valid) throw optionError(`Invalid redis ${showValue(spec)}: use a redis:// or rediss:// URL, ioredis options, or an ioredis Redis or Cluster.`);
  const RedisClass = loadIoredis();
  return typeof spec === "string" ? new RedisClass(spec) : new RedisClass(spec);
}

/**
 * ioredis's Redis class, loaded only when the driver makes its own client: ioredis is an optional
 * peer dependency, and `v-queue/drivers/redis` imports without it (the factory is synchronous,
 * so a synchronous require of ioredis's CommonJS build).
 */
function loadIoredis(): typeof Redis {
  try {
    const mod = createRequire(import.meta.url)("ioredis") as typeof Redis & { default?: typeof Redis };
    return mod.default ?? mod;
  } catch (error) {
    throw optionError("Cannot load `ioredis`. Install it (npm i ioredis) to use the redis driver.", { cause: error });
  }
}

function checkWaitReplicas(wait: WaitReplicas | undefined): void {
  if (wait === undefined) return;
  if (typeof wait !== "object" || wait === null)
    throw optionError(`Invalid waitReplicas ${showValue(wait)}: use { replicas, timeoutMs } (replicas from 0, timeoutMs from 1).`);
  checkOption("waitReplicas.replicas", wait.replicas, integer(0, 100));
  if (wait.timeoutMs !== undefined) checkOption("waitReplicas.timeoutMs", wait.timeoutMs, integer(1, 3_600_000));
}

/** The connection's identity for `storageKey`: host, port and db, or a cluster's startup nodes. */
function clientId(client: RedisClient): string {
  if (client.isCluster) {
    const nodes = (client as unknown as { startupNodes: unknown[] }).startupNodes ?? [];
    return `cluster(${nodes
      .map((n) => (typeof n === "object" && n ? `${(n as { host?: string }).host ?? ""}:${(n as { port?: number }).port ?? ""}` : String(n)))
      .sort()
      .join(",")})`;
  }
  const o = (client as Redis).options;
  return o.sentinels ? `sentinel(${o.name ?? ""})/${o.db ?? 0}` : `${o.host ?? ""}:${o.port ?? ""}/${o.db ?? 0}`;
}
