import type { Storage } from "unstorage";
import { defineDriver, type DriverLock, type FileHandle } from "../../src/driver";
import { checkOption, integer, optionError } from "../../src/check";
import { ioError, VQueueError } from "../../src/errors";

const DRIVER_NAME = "unstorage";

/** The five storage calls the driver makes: an unstorage 1.17 or 2.x `Storage` (or a `prefixStorage`) fits. */
export type UnstorageLike = Pick<Storage, "getItemRaw" | "setItemRaw" | "getKeys" | "removeItem" | "hasItem">;

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
}

/**
 * Queues on any unstorage backend (memory, fs, Redis, object stores, KV). unstorage has no
 * append and no ranged read, so a part file (`Q-<id>/Q_queue`) is stored as chunks: the
 * first bytes under the file's own key, each later write under `<key>~<start offset>`. An
 * append adds one key and never rewrites one. Every other file (info lines, positions) is
 * one small key. See the README, "Queues on unstorage", for what this can and cannot promise.
 *
 * @example
 * import { createStorage } from "unstorage";
 * import redisDriver from "unstorage/drivers/redis";
 * const storage = createStorage({ driver: redisDriver({ url: "redis://127.0.0.1:6379" }) });
 * const queue = await openQueue("orders", { driver: unstorageDriver({ storage, base: "vq" }) });
 */
const unstorageDriver = defineDriver((options: UnstorageDriverOptions) => {
  if (!options.storage || typeof options.storage.getItemRaw !== "function" || typeof options.storage.getKeys !== "function") {
    throw optionError(`Missing required option \`storage\` of the ${DRIVER_NAME} driver (an unstorage Storage).`);
  }
  const storage = guarded(options.storage);
  const base = (options.base ?? "").replace(/[/\\]/g, ":").replace(/^:+|:+$/g, "");
  const maxChunkBytes = options.maxChunkBytes ?? 1024 * 1024;
  const leaseMs = options.lockLeaseMs ?? 10_000;
  checkOption("maxChunkBytes", maxChunkBytes, integer(1));
  checkOption("lockLeaseMs", leaseMs, integer(30));
  const storageKey = `${DRIVER_NAME}:${options.key ?? storageId(options.storage)}:${base}`;
  const ctx: Context = { storage, maxChunkBytes, keyOf: (path) => joinKey(base, path) };

  return {
    name: DRIVER_NAME,
    storageKey,
    async open(path, { create }) {
      const key = ctx.keyOf(path);
      if (isChunked(path)) {
        if (await storage.hasItem(key)) return createChunkedHandle(ctx, key, undefined);
        if (!create) return undefined;
        await storage.setItemRaw(key, new Uint8Array(0));
        return createChunkedHandle(ctx, key, [{ start: 0, length: 0 }]);
      }
      let value = toBytes(await storage.getItemRaw(key));
      if (!value) {
        if (!create) return undefined;
        value = new Uint8Array(0);
        await storage.setItemRaw(key, value);
      }
      return createSmallHandle(ctx, key, value);
    },
    async readFile(path) {
      const key = ctx.keyOf(path);
      if (!isChunked(path)) return copyOf(toBytes(await storage.getItemRaw(key)));
      if (!(await storage.hasItem(key))) return undefined;
      const handle = createChunkedHandle(ctx, key, undefined);
      return handle.read(0, await handle.size());
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
      const mine = keys.filter((k) => k.startsWith(`${key}~`) || k.startsWith(`${key}:`)).sort().reverse();
      for (const k of mine) await storage.removeItem(k);
      await storage.removeItem(key);
    },
    lock(path) {
      return acquireLock(storage, ctx.keyOf(path), `${storageKey}\u0000${path}`, leaseMs);
    },
    async isLocked(path) {
      if (localLocks.has(`${storageKey}\u0000${path}`)) return true;
      const held = parseLock(await storage.getItemRaw(ctx.keyOf(path)));
      return held !== undefined && held.expires > Date.now();
    },
    async dispose() {
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

interface Context {
  storage: UnstorageLike;
  maxChunkBytes: number;
  keyOf(path: string): string;
}

interface Chunk {
  start: number;
  /** NaN until read: a listing gives starts only. */
  length: number;
}

const PAD = 15; // offsets up to 10^15 - 1: keys sort in offset order
const CHUNK_RE = /~(\d{15})$/;
const storageIds = new WeakMap<object, number>();
let lastStorageId = 0;
const localLocks = new Set<string>();

/** Part files (`Q-<id>/Q_queue`) are the only appended files: they get chunks. */
function isChunked(path: string): boolean {
  const cut = path.indexOf("/");
  return cut > 0 && path.endsWith("_queue") && path.indexOf("/", cut + 1) < 0;
}

function chunkKey(key: string, start: number): string {
  return start === 0 ? key : `${key}~${String(start).padStart(PAD, "0")}`;
}

/**
 * A part: chunk starts and lengths as far as known, and the last chunk fetched. Chunks are
 * immutable once written, except by `truncate` (crash recovery) and by writes inside the
 * file (which the engine does not do in normal running). A reader learns about appends by
 * probing the key right after the last chunk it knows, and re-lists on a miss.
 */
function createChunkedHandle(ctx: Context, key: string, known: Chunk[] | undefined): FileHandle {
  const { storage, maxChunkBytes } = ctx;
  let chunks = known;
  let cache: { start: number; data: Uint8Array } | undefined;

  const relist = async (): Promise<Chunk[]> => {
    const starts = [0];
    for (const k of await storage.getKeys(parentKey(key))) {
      if (!k.startsWith(`${key}~`)) continue;
      const match = CHUNK_RE.exec(k);
      if (match && k.length === key.length + 1 + PAD) starts.push(Number(match[1]));
    }
    starts.sort((a, b) => a - b);
    chunks = starts.map((start, i) => ({ start, length: i + 1 < starts.length ? starts[i + 1]! - start : Number.NaN }));
    if (cache && !chunks.some((c) => c.start === cache!.start && (Number.isNaN(c.length) || c.length === cache!.data.length))) cache = undefined;
    return chunks;
  };
  const fetchChunk = async (chunk: Chunk): Promise<Uint8Array | undefined> => {
    if (cache?.start === chunk.start && (Number.isNaN(chunk.length) || cache.data.length === chunk.length)) {
      chunk.length = cache.data.length; // a chunk just relisted learns its length from the cache too
      return cache.data;
    }
    const data = toBytes(await storage.getItemRaw(chunkKey(key, chunk.start)));
    if (!data) return undefined;
    chunk.length = data.length;
    cache = { start: chunk.start, data };
    return data;
  };
  /** Makes every chunk length known (only the last can be unknown); returns the end. */
  const settle = async (list: Chunk[]): Promise<number> => {
    const last = list.at(-1)!;
    if (Number.isNaN(last.length) && !(await fetchChunk(last))) last.length = 0;
    return last.start + last.length;
  };
  /** Learns about one more chunk after the known end; false when there is none. */
  const extend = async (list: Chunk[]): Promise<boolean> => {
    const end = await settle(list);
    const last = list.at(-1)!;
    if (last.length === 0) {
      // Only chunk 0 can be empty: the first append replaces it.
      cache = undefined;
      return Boolean((await fetchChunk(last))?.length);
    }
    const data = toBytes(await storage.getItemRaw(chunkKey(key, end)));
    if (!data || data.length === 0) return false;
    list.push({ start: end, length: data.length });
    cache = { start: end, data };
    return true;
  };
  const append = async (list: Chunk[], position: number, data: Uint8Array): Promise<void> => {
    for (let at = 0; at < data.length; at += maxChunkBytes) {
      // A copy: the memory backend keeps the very buffer it is given, and writers reuse theirs.
      const piece = data.slice(at, at + maxChunkBytes);
      const start = position + at;
      await storage.setItemRaw(chunkKey(key, start), piece);
      if (list.at(-1)!.length === 0) list.pop();
      list.push({ start, length: piece.length });
      cache = { start, data: piece };
    }
  };

  return {
    async size() {
      return settle(await relist());
    },
    async read(position, length) {
      const out = new Uint8Array(length);
      let filled = 0;
      let list = chunks ?? (position === 0 ? (chunks = [{ start: 0, length: Number.NaN }]) : await relist());
      let relisted = false;
      while (filled < length) {
        const at = position + filled;
        const end = await settle(list);
        if (at >= end) {
          if (await extend(list)) continue;
          if (relisted) break;
          // A miss where data may be: the layout changed under us (recovery cut a chunk).
          list = await relist();
          relisted = true;
          continue;
        }
        const chunk = list.findLast((c) => c.start <= at)!;
        const data = await fetchChunk(chunk);
        if (!data || chunk.start + data.length <= at) {
          if (relisted) break;
          list = await relist();
          relisted = true;
          continue;
        }
        const piece = data.subarray(at - chunk.start, Math.min(data.length, at - chunk.start + length - filled));
        out.set(piece, filled);
        filled += piece.length;
      }
      return filled === length ? out : out.subarray(0, filled);
    },
    async write(position, data) {
      const list = chunks ?? (await relist());
      const end = await settle(list);
      if (position < end) {
        // Inside the file: patch the chunks it covers, each under its own key.
        const stop = Math.min(end, position + data.length);
        for (const chunk of list) {
          const chunkEnd = chunk.start + chunk.length;
          if (chunkEnd <= position || chunk.start >= stop) continue;
          cache = undefined;
          const old = toBytes(await storage.getItemRaw(chunkKey(key, chunk.start))) ?? new Uint8Array(0);
          const patched = new Uint8Array(Math.max(old.length, chunk.length));
          patched.set(old);
          const from = Math.max(position, chunk.start);
          patched.set(data.subarray(from - position, Math.min(chunkEnd, stop) - position), from - chunk.start);
          await storage.setItemRaw(chunkKey(key, chunk.start), patched);
        }
        if (stop === position + data.length) return;
        data = data.subarray(stop - position);
        position = stop;
      }
      if (position > end) {
        // Past the end: the gap reads as zeros, as in a file.
        await append(list, end, new Uint8Array(position - end));
      }
      await append(list, position, data);
    },
    async truncate(length) {
      const list = chunks ?? (await relist());
      const end = await settle(list);
      if (length >= end) {
        if (length > end) await append(list, end, new Uint8Array(length - end));
        return;
      }
      // Later chunks go first, last one first, so a crash leaves a contiguous prefix.
      while (list.length > 1 && list.at(-1)!.start >= length) {
        await storage.removeItem(chunkKey(key, list.pop()!.start));
      }
      const last = list.at(-1)!;
      if (last.start + last.length === length) return;
      const old = (await fetchChunk(last)) ?? new Uint8Array(0);
      const cut = old.slice(0, length - last.start);
      await storage.setItemRaw(chunkKey(key, last.start), cut);
      last.length = cut.length;
      cache = { start: last.start, data: cut };
    },
    async sync() {
      // A finished setItemRaw is as durable as the backend makes it (README).
    },
    async close() {
      cache = undefined;
    },
  };
}

/**
 * An info file: one key, read fresh on every read (a poll). Writes patch the value this
 * handle last read or wrote: each info file has a single writer (the lock holder).
 */
function createSmallHandle(ctx: Context, key: string, initial: Uint8Array): FileHandle {
  const { storage } = ctx;
  let value = initial;
  const load = async () => (value = toBytes(await storage.getItemRaw(key)) ?? new Uint8Array(0));
  return {
    async size() {
      return (await load()).length;
    },
    async read(position, length) {
      return (await load()).slice(position, position + length);
    },
    async write(position, data) {
      const next = new Uint8Array(Math.max(value.length, position + data.length));
      next.set(value);
      next.set(data, position);
      await storage.setItemRaw(key, next);
      value = next;
    },
    async truncate(length) {
      await load();
      const next = new Uint8Array(length);
      next.set(value.subarray(0, length));
      await storage.setItemRaw(key, next);
      value = next;
    },
    async sync() {},
    async close() {},
  };
}

/**
 * Locks: in-process first (exact), then a lock key holding `owner expiry`, taken with
 * check, set, wait, verify, and refreshed every third of the lease. Without a compare-and-set
 * in unstorage's API two hosts that check within the same few milliseconds can both win:
 * the verify after a pause narrows that window, it does not close it (README).
 */
async function acquireLock(storage: UnstorageLike, key: string, local: string, leaseMs: number): Promise<DriverLock | undefined> {
  if (localLocks.has(local)) return undefined;
  localLocks.add(local);
  const owner = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
  const stamp = () => new TextEncoder().encode(`v-queue-lock ${owner} ${Date.now() + leaseMs}\n`);
  try {
    const held = parseLock(await storage.getItemRaw(key));
    if (held && held.expires > Date.now()) {
      localLocks.delete(local);
      return undefined;
    }
    await storage.setItemRaw(key, stamp());
    await new Promise((resolve) => setTimeout(resolve, LOCK_SETTLE_MS));
    if (parseLock(await storage.getItemRaw(key))?.owner !== owner) {
      localLocks.delete(local);
      return undefined;
    }
  } catch (error) {
    localLocks.delete(local);
    throw error;
  }
  let released = false;
  let refreshing: Promise<void> | undefined;
  // Until when nobody else can have taken the lock: the expiry of the last stamp we wrote,
  // less a third of the lease for clocks that disagree and writes in flight.
  let safeUntil = Date.now() + leaseMs - Math.floor(leaseMs / 3);
  const lost = new AbortController();
  const lose = () => {
    if (lost.signal.aborted) return;
    clearInterval(timer);
    lost.abort(new VQueueError("E_LOCKED", `[${DRIVER_NAME}] Lost the lock ${JSON.stringify(key)}: its lease ran out (the holder was paused or cut off) and another holder took it.`));
  };
  const refresh = async () => {
    const held = parseLock(await storage.getItemRaw(key));
    if (released || lost.signal.aborted) return;
    if (held?.owner !== owner || held.expires <= Date.now()) return lose();
    const at = Date.now();
    await storage.setItemRaw(key, stamp());
    safeUntil = at + leaseMs - Math.floor(leaseMs / 3);
  };
  const timer = setInterval(() => {
    refreshing ??= refresh()
      .catch(() => {}) // a failed refresh is retried; the lease covers two misses
      .finally(() => (refreshing = undefined));
  }, Math.floor(leaseMs / 3));
  (timer as { unref?: () => void }).unref?.();
  return {
    lost: lost.signal,
    async assertHeld() {
      if (!lost.signal.aborted && Date.now() < safeUntil) return;
      // Stale (we were paused, or refreshes failed): ask the storage before any write.
      if (!lost.signal.aborted) await (refreshing ??= refresh().finally(() => (refreshing = undefined)));
      if (lost.signal.aborted) throw lost.signal.reason;
    },
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      await refreshing?.catch(() => {});
      try {
        if (parseLock(await storage.getItemRaw(key))?.owner === owner) await storage.removeItem(key);
      } finally {
        localLocks.delete(local);
      }
    },
  };
}

const LOCK_SETTLE_MS = 15;

function parseLock(value: unknown): { owner: string; expires: number } | undefined {
  const bytes = toBytes(value);
  if (!bytes) return undefined;
  const [tag, owner, expires] = new TextDecoder().decode(bytes).trim().split(" ");
  return tag === "v-queue-lock" && owner && Number.isFinite(Number(expires)) ? { owner, expires: Number(expires) } : undefined;
}

/** unstorage hands back Buffers, Uint8Arrays, strings or JSON-ified Buffers depending on the backend. */
function toBytes(value: unknown): Uint8Array | undefined {
  if (value === null || value === undefined) return undefined;
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === "string") {
    if (value.startsWith("base64:")) return Uint8Array.from(atob(value.slice(7)), (c) => c.charCodeAt(0));
    return new TextEncoder().encode(value);
  }
  const data = (value as { type?: string; data?: unknown }).data;
  if ((value as { type?: string }).type === "Buffer" && Array.isArray(data)) return Uint8Array.from(data as number[]);
  throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver failed: unexpected value type from storage: ${typeof value}.`);
}

function copyOf(bytes: Uint8Array | undefined): Uint8Array | undefined {
  return bytes && bytes.slice();
}

function joinKey(base: string, path: string): string {
  const rel = path.replace(/\//g, ":");
  return base && rel ? `${base}:${rel}` : base || rel;
}

function parentKey(key: string): string {
  const cut = key.lastIndexOf(":");
  return cut < 0 ? "" : key.slice(0, cut);
}

function storageId(storage: object): string {
  let id = storageIds.get(storage);
  if (id === undefined) storageIds.set(storage, (id = ++lastStorageId));
  return `#${id}`;
}
