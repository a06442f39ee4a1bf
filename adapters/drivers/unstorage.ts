import { defineDriver } from "../../src/core/driver";
import { checkOption, integer, optionError } from "../../src/core/check";
import { ioError } from "../../src/core/errors";
import { workersKvProblem } from "../../src/options/workers-kv";

import { createLogHandle, createRecordHandle } from "./utils/unstorage-handles";
import { copyOf, DRIVER_NAME, joinKey, parentKey, toBytes, type Context, type UnstorageLike } from "./utils/unstorage-keys";
import { claimInstance, INSTANCE_KEY, type InstanceClaim } from "./utils/unstorage-instance";
import { acquireLock, localLocks, parseLock } from "./utils/unstorage-lock";

export type { UnstorageLike } from "./utils/unstorage-keys";

export interface UnstorageDriverOptions {
  /**
   * The storage, e.g. `createStorage({ driver: redisDriver({ url }) })`. Every key the
   * driver writes is `<base>:<path>` with `/` turned into `:`.
   */
  storage: UnstorageLike;
  /**
   * Key prefix, so that queues can share a storage with other data. Listing a directory
   * lists every key under it, so on a shared Redis give the queues their own prefix.
   * @default ""
   */
  base?: string;
  /**
   * Largest value written under one key. A part is a series of chunks, one per write (a
   * batch of pushes is one write); a write larger than this is split.
   * @default 1048576 (1 MiB)
   */
  maxChunkBytes?: number;
  /**
   * How long a writer or consumer lock stays valid without being refreshed. The holder
   * refreshes it every third of this; when the holder dies, the lock is free after at most
   * this long. Hosts sharing a storage need clocks that agree well within it.
   * @default 10000
   */
  lockLeaseMs?: number;
  /**
   * Names the storage: driver instances with the same key in one process share in-process
   * locks and wake consumers at once on a push.
   * @default one key per `storage` object (and base)
   */
  key?: string;
  /** Call `storage.dispose()` from the driver's `dispose()` (for a storage made just for it). @default false */
  disposeStorage?: boolean;
  /**
   * How many processes may write to this storage and base. unstorage cannot fence a write (no
   * compare-and-set with it): a process paused past its lease that wakes after another took its
   * locks over can land writes nobody reads. So by default (`"one"`) the driver registers its
   * process in the storage before its first write (`<base>:~instance`, a lease like a lock's),
   * and a second live process is refused with `E_UNFENCED`; a dead one's registration runs out
   * within `lockLeaseMs`. `"many"`: no registration, several processes at once, accepting that risk.
   * @default "one"
   */
  instances?: "one" | "many";
}

/**
 * Queues on any unstorage backend (memory, fs, Redis, object stores, KV). unstorage has no
 * append and no ranged read, so a part file (`Q-<id>/Q_queue`) is stored as chunks: the
 * first bytes under the file's own key, each later write under `<key>~<start offset>`. An
 * append adds one key and never rewrites one. Every other file (info lines, positions) is
 * one small key. docs/storage.md#queues-on-unstorage says what this can and cannot promise.
 *
 * @example
 * import { createStorage } from "unstorage";
 * import redisDriver from "unstorage/drivers/redis";
 * const storage = createStorage({ driver: redisDriver({ url: "redis://127.0.0.1:6379" }) });
 * const queue = await openQueue("orders", { driver: unstorageDriver({ storage, base: "vq" }) });
 */
const unstorageDriver = defineDriver((options: UnstorageDriverOptions) => {
  const kv = workersKvProblem(options?.storage, "storage");
  if (kv) throw optionError(kv);
  if (!options.storage || typeof options.storage.getItemRaw !== "function" || typeof options.storage.getKeys !== "function") {
    throw optionError(`Missing required option \`storage\` of the ${DRIVER_NAME} driver (an unstorage Storage).`);
  }
  refuseRedisCluster(options.storage);
  const raw = guarded(options.storage);
  const base = (options.base ?? "").replace(/[/\\]/g, ":").replace(/^:+|:+$/g, "");
  const maxChunkBytes = options.maxChunkBytes ?? 1024 * 1024;
  const leaseMs = options.lockLeaseMs ?? 10_000;
  checkOption("maxChunkBytes", maxChunkBytes, integer(1));
  checkOption("lockLeaseMs", leaseMs, integer(30));
  const instances = options.instances ?? "one";
  if (instances !== "one" && instances !== "many")
    throw optionError(
      `Invalid instances ${JSON.stringify(instances)} of the ${DRIVER_NAME} driver: use "one" (the default: a second process on this storage is refused) or "many" (several, unfenced).`,
    );
  const storageKey = `${DRIVER_NAME}:${options.key ?? storageId(options.storage)}:${base}`;
  const instance = instances === "one" ? claimInstance(raw, joinKey(base, INSTANCE_KEY), storageKey, leaseMs) : undefined;
  const storage = instance ? gated(raw, instance) : raw;
  const ctx: Context = { storage, maxChunkBytes, keyOf: (path) => joinKey(base, path) };

  return {
    name: DRIVER_NAME,
    storageKey,
    async openLog(path, { create }) {
      const key = ctx.keyOf(path);
      if (await storage.hasItem(key)) return createLogHandle(ctx, key, undefined);
      if (!create) return undefined;
      await storage.setItemRaw(key, new Uint8Array(0));
      return createLogHandle(ctx, key, [{ start: 0, length: 0 }]);
    },
    async openRecord(path, { create }) {
      const key = ctx.keyOf(path);
      if (!(await storage.hasItem(key))) {
        if (!create) return undefined;
        await storage.setItemRaw(key, new Uint8Array(0));
      }
      return createRecordHandle(ctx, key);
    },
    async readRecord(path) {
      return copyOf(toBytes(await storage.getItemRaw(ctx.keyOf(path))));
    },
    async writeAtomic(path, data) {
      // One key written with one call: a reader gets the old value or the new one.
      await storage.setItemRaw(ctx.keyOf(path), data.slice());
    },
    async list(dir) {
      const prefix = joinKey(base, dir);
      const names = new Set<string>();
      for (const key of await storage.getKeys(prefix)) {
        const rest = prefix ? key.slice(prefix.length + 1) : key;
        if (prefix && key.slice(0, prefix.length + 1) !== `${prefix}:`) continue;
        const name = rest.split(":")[0]!;
        // `~` never occurs in engine names: it marks the driver's own keys (chunks).
        if (name && !name.includes("~")) names.add(name);
      }
      return [...names];
    },
    async mkdir() {
      // Directories are implicit in keys: one exists as soon as a key under it does.
    },
    async remove(path) {
      const key = ctx.keyOf(path);
      const keys = await storage.getKeys(parentKey(key));
      const mine = keys
        .filter((k) => k.startsWith(`${key}~`) || k.startsWith(`${key}:`))
        .sort()
        .reverse();
      for (const k of mine) await storage.removeItem(k);
      await storage.removeItem(key);
    },
    async lock(path) {
      // Superseded or refused: said as such (E_UNFENCED), not as a lock another holder has.
      await instance?.assertOurs();
      return acquireLock(storage, ctx.keyOf(path), `${storageKey}\u0000${path}`, leaseMs, instance);
    },
    async isLocked(path) {
      if (localLocks.has(`${storageKey}\u0000${path}`)) return true;
      const held = parseLock(await storage.getItemRaw(ctx.keyOf(path)));
      return held !== undefined && held.expires > Date.now();
    },
    async start() {
      await instance?.ready();
    },
    async dispose() {
      await instance?.release().catch(() => {}); // a registration left behind runs out within the lease
      if (options.disposeStorage) await (options.storage as { dispose?: () => unknown }).dispose?.();
    },
  };
});

export default unstorageDriver;

// --- Internal helpers ---

/**
 * The storage with every failure turned into `E_IO` (the backend's error as `cause`): every
 * call of the driver, its locks' included, goes through it.
 */
function guarded(storage: UnstorageLike): UnstorageLike {
  const call =
    <A extends unknown[], R>(method: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await method.apply(storage, args);
      } catch (error) {
        throw ioError(DRIVER_NAME, error);
      }
    };
  return {
    getItemRaw: call(storage.getItemRaw),
    setItemRaw: call(storage.setItemRaw),
    getKeys: call(storage.getKeys),
    removeItem: call(storage.removeItem),
    hasItem: call(storage.hasItem),
  } as UnstorageLike;
}

/**
 * The storage whose writes wait for this process's registration (refused, `E_UNFENCED`, while
 * another instance holds it) and stop once another instance took it over. Reads are not held
 * up: inspecting a served storage from another process stays possible.
 */
function gated(storage: UnstorageLike, instance: InstanceClaim): UnstorageLike {
  const write =
    <A extends unknown[], R>(method: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      await instance.assertOurs();
      return method.apply(storage, args);
    };
  return { ...storage, setItemRaw: write(storage.setItemRaw), removeItem: write(storage.removeItem) } as UnstorageLike;
}

/**
 * unstorage's redis driver in cluster mode lists keys with a SCAN of one node (of many): a
 * listing would miss the parts and consumers on the other masters, and queues would lose
 * data silently. Refused, naming the driver made for it.
 */
function refuseRedisCluster(storage: UnstorageLike): void {
  const getMounts = (storage as { getMounts?: (base: string, parents?: boolean) => { driver?: { name?: string; options?: { cluster?: unknown } } }[] })
    .getMounts;
  if (typeof getMounts !== "function") return;
  for (const { driver } of getMounts.call(storage, "", true)) {
    if (driver?.name === "redis" && driver.options?.cluster) {
      throw optionError(
        `The ${DRIVER_NAME} driver cannot use unstorage's redis driver in cluster mode: it lists keys with a SCAN of one node, so parts and consumers on the other masters would be missed. Use v-queue/drivers/redis (one hash tag per queue, a registry instead of SCAN) with an ioredis Cluster.`,
      );
    }
  }
}

const storageIds = new WeakMap<object, number>();
let lastStorageId = 0;

function storageId(storage: object): string {
  let id = storageIds.get(storage);
  if (id === undefined) storageIds.set(storage, (id = ++lastStorageId));
  return `#${id}`;
}
