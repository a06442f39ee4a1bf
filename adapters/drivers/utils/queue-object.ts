import { DurableObject } from "cloudflare:workers";
import type { DurableObjectStorage } from "./durable-object-types";

/**
 * The Durable Object that owns one queue's files (or one partition's, a partition being a queue
 * of its own), or, for the instance named `<prefix>/`, the registry of queues. Each method is
 * one RPC call from the durable-object driver. A Durable Object runs one event at a time and its
 * storage calls keep other events out (input gates), and writes issued with no `await` between
 * them commit together (write coalescing): so each method reads, checks the fence, and writes as
 * one atomic step, as the redis driver's Lua scripts do.
 *
 * Keys of a queue's object:
 * - `s:<path>`            a file's size (the file exists when this key does)
 * - `c:<path>#<index>`    its bytes, in chunks of CHUNK_BYTES (the last one may be shorter)
 * - `d:<dir>`             a directory made by mkdir
 * - `l:<path>`            a lock: `{ epoch, until }`
 * - `epoch`               the fencing counter of the queue's locks (never removed)
 * - `registered`          set once the registry lists the queue
 * Keys of the registry: `q:<queue>`.
 */

/** Bytes per stored value: under the 128 KiB value limit of the key-value backend (the SQLite one allows 2 MB). */
export const CHUNK_BYTES = 64 * 1024;
/** Keys per get, put and delete call (the storage API's limit). */
const KEYS_PER_CALL = 128;

export type WriteStatus = { ok: true; unregistered: boolean } | { ok: false; reason: "fenced" | "missing" | "not-at-end"; size?: number };
export interface Fence {
  path: string;
  epoch: number;
}
interface LockRecord {
  epoch: number;
  until: number;
}

const sizeKey = (path: string) => `s:${path}`;
const chunkKey = (path: string, index: number) => `c:${path}#${index.toString(16).padStart(8, "0")}`;

export class VQueueObject extends DurableObject {
  get #storage(): DurableObjectStorage {
    return this.ctx.storage;
  }

  /** Whether the file exists; with `create`, makes it empty when missing. `unregistered`: the registry does not list the queue yet. */
  async open(path: string, create: boolean): Promise<{ exists: boolean; unregistered: boolean }> {
    if ((await this.#storage.get<number>(sizeKey(path))) !== undefined) return { exists: true, unregistered: false };
    if (!create) return { exists: false, unregistered: false };
    await this.#storage.put({ [sizeKey(path)]: 0 });
    return { exists: true, unregistered: await this.#unregistered() };
  }

  async size(path: string): Promise<number | undefined> {
    return this.#storage.get<number>(sizeKey(path));
  }

  /** Up to `length` bytes at `position` (shorter at the end); undefined for a missing file. */
  async read(path: string, position: number, length: number): Promise<Uint8Array | undefined> {
    const size = await this.size(path);
    if (size === undefined) return undefined;
    const end = Math.min(size, position + Math.max(0, length));
    if (end <= position) return new Uint8Array(0);
    const first = Math.floor(position / CHUNK_BYTES);
    const last = Math.floor((end - 1) / CHUNK_BYTES);
    const keys = Array.from({ length: last - first + 1 }, (_, i) => chunkKey(path, first + i));
    const chunks = await this.#getMany<Uint8Array>(keys);
    const out = new Uint8Array(end - position);
    for (let index = first; index <= last; index++) {
      const chunk = chunks.get(chunkKey(path, index)) ?? new Uint8Array(0);
      const from = Math.max(position, index * CHUNK_BYTES);
      const to = Math.min(end, index * CHUNK_BYTES + chunk.length);
      if (to > from) out.set(chunk.subarray(from - index * CHUNK_BYTES, to - index * CHUNK_BYTES), from - position);
    }
    return out;
  }

  /** The whole file, or undefined when missing. */
  async readAll(path: string): Promise<Uint8Array | undefined> {
    return this.read(path, 0, Number.MAX_SAFE_INTEGER);
  }

  /** Appends `data` where the log ends (`at`), if `fence` (when given) is still the lock's holder. */
  async append(path: string, at: number, data: Uint8Array, fence: Fence | undefined): Promise<WriteStatus> {
    const size = await this.size(path);
    if (size === undefined) return { ok: false, reason: "missing" };
    if (size !== at) return { ok: false, reason: "not-at-end", size };
    if (!(await this.#fenceHolds(fence))) return { ok: false, reason: "fenced" };
    // The last chunk, when partly filled, is rewritten with the start of `data`.
    const tailIndex = Math.floor(size / CHUNK_BYTES);
    const tail = size % CHUNK_BYTES === 0 ? new Uint8Array(0) : ((await this.#storage.get<Uint8Array>(chunkKey(path, tailIndex))) ?? new Uint8Array(0));
    const bytes = concat(tail.subarray(0, size % CHUNK_BYTES), data);
    const entries: Record<string, unknown> = { [sizeKey(path)]: size + data.length };
    for (let i = 0; i * CHUNK_BYTES < bytes.length; i++) entries[chunkKey(path, tailIndex + i)] = bytes.slice(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
    await this.#write(entries, []);
    return { ok: true, unregistered: false };
  }

  /** Cuts the file to `length` bytes (no-op when it is shorter). */
  async truncate(path: string, length: number, fence: Fence | undefined): Promise<WriteStatus> {
    const size = await this.size(path);
    if (size === undefined) return { ok: false, reason: "missing" };
    if (!(await this.#fenceHolds(fence))) return { ok: false, reason: "fenced" };
    if (length >= size) return { ok: true, unregistered: false };
    const keep = Math.ceil(length / CHUNK_BYTES);
    const gone = Array.from({ length: Math.ceil(size / CHUNK_BYTES) - keep }, (_, i) => chunkKey(path, keep + i));
    const entries: Record<string, unknown> = { [sizeKey(path)]: length };
    if (length % CHUNK_BYTES !== 0) {
      const last = (await this.#storage.get<Uint8Array>(chunkKey(path, keep - 1))) ?? new Uint8Array(0);
      entries[chunkKey(path, keep - 1)] = last.slice(0, length % CHUNK_BYTES);
    }
    await this.#write(entries, gone);
    return { ok: true, unregistered: false };
  }

  /** Makes the file hold exactly `data` (made if missing): readers see the old bytes or the new ones. */
  async replace(path: string, data: Uint8Array, fence: Fence | undefined): Promise<WriteStatus> {
    if (!(await this.#fenceHolds(fence))) return { ok: false, reason: "fenced" };
    const size = (await this.size(path)) ?? 0;
    const count = Math.ceil(data.length / CHUNK_BYTES);
    const entries: Record<string, unknown> = { [sizeKey(path)]: data.length };
    for (let i = 0; i < count; i++) entries[chunkKey(path, i)] = data.slice(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
    const gone = Array.from({ length: Math.max(0, Math.ceil(size / CHUNK_BYTES) - count) }, (_, i) => chunkKey(path, count + i));
    const unregistered = await this.#unregistered();
    await this.#write(entries, gone);
    return { ok: true, unregistered };
  }

  /** Names directly under `dir` ("" is the queue's top level), held locks included. */
  async list(dir: string): Promise<string[]> {
    const under = dir ? `${dir}/` : "";
    const names = new Set<string>();
    for (const kind of ["s:", "d:"]) {
      for (const key of (await this.#storage.list({ prefix: `${kind}${under}` })).keys()) names.add(key.slice(kind.length + under.length).split("/")[0]!);
    }
    // Held locks are listed too, as lock files are on disk: an admin finds a consumer by its lock before its first file.
    const now = Date.now();
    for (const [key, held] of await this.#storage.list<LockRecord>({ prefix: `l:${under}` }))
      if (held.until > now) names.add(key.slice(2 + under.length).split("/")[0]!);
    names.delete("");
    return [...names];
  }

  async mkdir(dir: string): Promise<{ unregistered: boolean }> {
    await this.#storage.put({ [`d:${dir}`]: 1 });
    return { unregistered: await this.#unregistered() };
  }

  /**
   * Removes a file or a directory tree, unless `fence` is stale (`fenced`: nothing removed).
   * `empty`: the queue has no file left (the registry may forget it).
   */
  async remove(path: string, fence?: Fence): Promise<{ empty: boolean; fenced?: true }> {
    if (!(await this.#fenceHolds(fence))) return { empty: false, fenced: true };
    const keys = [sizeKey(path), `d:${path}`];
    for (const prefix of [`c:${path}#`, `s:${path}/`, `d:${path}/`, `c:${path}/`]) keys.push(...(await this.#storage.list({ prefix })).keys());
    await this.#write({}, keys);
    const empty = (await this.#storage.list({ prefix: "s:", limit: 1 })).size === 0 && (await this.#storage.list({ prefix: "d:", limit: 1 })).size === 0;
    if (empty) await this.#storage.delete(["registered"]);
    return { empty };
  }

  /** Takes the lock at `path` for `leaseMs` unless a live lease holds it: its epoch, or 0. */
  async lock(path: string, leaseMs: number): Promise<number> {
    const held = await this.#storage.get<LockRecord>(`l:${path}`);
    if (held && held.until > Date.now()) return 0;
    const epoch = ((await this.#storage.get<number>("epoch")) ?? 0) + 1;
    await this.#storage.put({ epoch, [`l:${path}`]: { epoch, until: Date.now() + leaseMs } satisfies LockRecord });
    return epoch;
  }

  /**
   * Extends the lease while the lock is still `epoch`'s. A lease that ran out with nobody taking
   * the lock since is taken back: no write of another holder can have come between (any would
   * have needed a newer epoch), so the holder may go on.
   */
  async renew(path: string, epoch: number, leaseMs: number): Promise<boolean> {
    const held = await this.#storage.get<LockRecord>(`l:${path}`);
    if (held?.epoch !== epoch) return false;
    await this.#storage.put({ [`l:${path}`]: { epoch, until: Date.now() + leaseMs } satisfies LockRecord });
    return true;
  }

  async unlock(path: string, epoch: number): Promise<void> {
    const held = await this.#storage.get<LockRecord>(`l:${path}`);
    if (held?.epoch === epoch) await this.#storage.delete([`l:${path}`]);
  }

  async isLocked(path: string): Promise<boolean> {
    const held = await this.#storage.get<LockRecord>(`l:${path}`);
    return held !== undefined && held.until > Date.now();
  }

  /** Notes that the registry lists this queue now. */
  async setRegistered(): Promise<void> {
    await this.#storage.put({ registered: true });
  }

  // --- The registry's methods (the object named `<prefix>/`) ---

  async register(queue: string): Promise<void> {
    await this.#storage.put({ [`q:${queue}`]: 1 });
  }

  async unregister(queue: string): Promise<void> {
    await this.#storage.delete([`q:${queue}`]);
  }

  async queues(): Promise<string[]> {
    return [...(await this.#storage.list({ prefix: "q:" })).keys()].map((key) => key.slice(2));
  }

  // --- Internal ---

  /** A write's fence holds when the lock it names is still at its epoch (see `renew` for a lapsed lease). */
  async #fenceHolds(fence: Fence | undefined): Promise<boolean> {
    if (!fence) return true;
    return (await this.#storage.get<LockRecord>(`l:${fence.path}`))?.epoch === fence.epoch;
  }

  async #unregistered(): Promise<boolean> {
    return (await this.#storage.get<boolean>("registered")) !== true;
  }

  async #getMany<T>(keys: string[]): Promise<Map<string, T>> {
    const out = new Map<string, T>();
    for (let i = 0; i < keys.length; i += KEYS_PER_CALL) for (const [k, v] of await this.#storage.get<T>(keys.slice(i, i + KEYS_PER_CALL))) out.set(k, v);
    return out;
  }

  /** Puts and deletes as one atomic batch: every call issued before the first `await` (write coalescing). */
  async #write(entries: Record<string, unknown>, deletes: string[]): Promise<void> {
    const pending: Promise<unknown>[] = [];
    const list = Object.entries(entries);
    for (let i = 0; i < list.length; i += KEYS_PER_CALL) pending.push(this.#storage.put(Object.fromEntries(list.slice(i, i + KEYS_PER_CALL))));
    for (let i = 0; i < deletes.length; i += KEYS_PER_CALL) pending.push(this.#storage.delete(deletes.slice(i, i + KEYS_PER_CALL)));
    await Promise.all(pending);
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
