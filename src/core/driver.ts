import type { StopSignalLike } from "./stop-signal";

/**
 * The storage a queue lives on, as the engine uses it: an append-only log per part, small
 * records rewritten whole (the info lines), listing, and locks. Nothing more: a driver for
 * files, a key-value store, an object store or another engine provides exactly this.
 * Paths are relative to the driver's base, `/`-separated, never absolute, never `..`; the
 * engine names them (storage/paths.ts), and a driver may map them to keys as it likes.
 *
 * Drivers: `v-queue/drivers/fs` (Node's fs, the default on Node), `v-queue/drivers/memory`,
 * `v-queue/drivers/unstorage`, `v-queue/drivers/redis`.
 *
 * Fencing: every holder of a lock (a queue's writer, a consumer) passes its lock as `fence` to
 * each of its writes and removes (src/storage/fence.ts). The redis driver checks it in the same Lua script as the
 * write; the fs driver with `lockLeaseMs` checks it under the lock's write mutex. The fs driver
 * without leases and the memory driver ignore it: their locks die only with their process, so a
 * live holder's lock is never taken over. The unstorage driver ignores it too (no
 * compare-and-set in unstorage's API: best effort, docs/storage.md#queues-on-unstorage).
 */
export interface QueueDriver {
  /** Short name for messages, e.g. "fs". */
  readonly name: string;
  /** A part's records (`Q-<id>/Q_queue`): an append-only log; `create` makes it empty if missing. */
  openLog(path: string, options: { create: boolean }): Promise<LogFile | undefined>;
  /** A small record (an info line), kept at hand to be read again and replaced; `create` makes it empty if missing. */
  openRecord(path: string, options: { create: boolean }): Promise<RecordFile | undefined>;
  /** Reads a small record once, or undefined if it does not exist. */
  readRecord(path: string): Promise<Uint8Array | undefined>;
  /**
   * A log's size in bytes without opening it, or undefined if it does not exist: what a look at
   * many queues (an overview) asks of each current part. Drivers without a cheaper way leave it
   * out (the log is opened and measured instead).
   */
  sizeOf?(path: string): Promise<number | undefined>;
  /** Names in a directory ("" is the base), or [] when it does not exist. */
  list(dir: string): Promise<string[]>;
  /** Creates a directory and its parents. */
  mkdir(dir: string): Promise<void>;
  /**
   * Removes a file or a directory tree; no error when missing. `fence`: the lock of the holder
   * removing it (a part deleted by retention, a journal after compaction): refused (`E_FENCED`)
   * once that lock was taken over, as a write is.
   */
  remove(path: string, fence?: DriverLock): Promise<void>;
  /**
   * Takes an exclusive lock named by `path`, held until `release()` or until the process
   * dies (kill -9 included). Resolves undefined when another holder has it.
   */
  lock(path: string): Promise<DriverLock | undefined>;
  /**
   * Whether someone holds the lock named by `path`, without taking it (a reader must not
   * keep a writer from opening). Optional: without it, readers assume the writer is alive
   * and trust the info lines.
   */
  isLocked?(path: string): Promise<boolean>;
  /**
   * Writes a whole small file so that readers see all of it or none (a v3 part's dictionary):
   * on files a temporary file, fsync (with `sync`) and a rename. Optional: without it the
   * engine replaces the file in place.
   */
  writeAtomic?(path: string, data: Uint8Array, options: { sync: boolean; fence?: DriverLock }): Promise<void>;
  /** Makes a directory's entries durable (new files and parts). Optional. */
  syncDir?(dir: string): Promise<void>;
  /**
   * Calls `onChange` when files under `dir` may have changed, with the changed entry's name in
   * `dir` when the driver knows it (no name: anything may have changed), and returns a stop
   * function; or undefined when it cannot watch `dir`, and the caller polls. Optional: without
   * it, consumers in other processes poll the info file.
   */
  watch?(dir: string, onChange: (name?: string) => void): (() => void) | undefined;
  /**
   * A key that is equal for two driver instances on the same storage, so that writers
   * and consumers in one process find each other (wake-ups without I/O).
   */
  readonly storageKey: string;
  /**
   * How often a consumer without a watch looks for another instance's writes, unless its own
   * `pollIntervalMs` says. Optional (100 ms): a driver whose every read is a billed call sets more.
   */
  readonly pollIntervalMs?: number;
  /**
   * Makes the storage this process's to write (the unstorage driver registers it as the
   * storage's one instance) or rejects (`E_UNFENCED`). A server awaits it before serving, so a
   * refused second instance stops at start. Optional: writes claim it as well.
   */
  start?(): Promise<void>;
  /** Frees resources (watchers, connections). */
  dispose?(): Promise<void>;
}

/** A part's records: appended to, read by range, its torn tail cut off after a crash. */
export interface LogFile {
  /** Current size in bytes. */
  size(): Promise<number>;
  /** Reads up to `length` bytes at `position`; shorter at the end of the log. */
  read(position: number, length: number): Promise<Uint8Array>;
  /**
   * Appends all of `data`; `at` is where the log ends now (the writer knows it: a check, not a
   * seek). `fence`: the lock the writer holds; see `DriverLock.epoch`.
   */
  append(at: number, data: Uint8Array, fence?: DriverLock): Promise<void>;
  /** Cuts the log to `length` bytes (recovery: a torn tail; a failed append). */
  truncate(length: number, fence?: DriverLock): Promise<void>;
  /** Makes what was appended durable (fdatasync). */
  sync(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A small record rewritten whole: an info line. Only its first line counts (docs/format.md#info-lines): the
 * fs driver rewrites it in place as the crate does, so bytes after that line may remain.
 */
export interface RecordFile {
  /** The record's bytes now (another process may have replaced them since the last read). */
  read(): Promise<Uint8Array>;
  /** Makes the record start with `data`. `fence`: the lock the writer holds; see `DriverLock.epoch`. */
  replace(data: Uint8Array, fence?: DriverLock): Promise<void>;
  /** Makes the last replace durable. */
  sync(): Promise<void>;
  close(): Promise<void>;
}

export interface DriverLock {
  release(): Promise<void>;
  /**
   * Aborted once the lock is known to be lost (a lease that ran out and was taken by another
   * holder), with the error as its reason. Drivers whose locks cannot be lost leave it out.
   */
  readonly lost?: StopSignalLike;
  /**
   * Resolves while the lock is surely held; rejects (`E_LOCKED`) once it is lost. A holder
   * calls it before each write, so that a holder that was paused past its lease (SIGSTOP, a
   * long GC, a suspended VM) finds out before it writes, not after. Cheap while the lease is
   * fresh. Drivers whose locks cannot be lost leave it out.
   */
  assertHeld?(): Promise<void>;
  /**
   * Whether the lock is surely held now, without asking the storage: false once the lease is
   * stale (not renewed in time) or lost. Drivers whose locks cannot be lost leave it out.
   */
  fresh?(): boolean;
  /**
   * The fencing token: a number that grows each time the lock changes hands, never reused.
   * Drivers whose locks can be lost (leases) set it, and check it in the same atomic step as
   * every write given this lock as `fence` (append, truncate, replace, writeAtomic, remove): a write
   * from a holder whose lock was taken over is refused with `E_FENCED` and changes nothing,
   * however long the holder was paused. Drivers whose locks cannot be lost (a lock that dies
   * only with its process) leave it out and ignore `fence`.
   */
  readonly epoch?: number;
}

/**
 * A typed identity helper, unstorage-style: `export default defineDriver((opts = {}) => ({ ... }))`.
 * The factory keeps its own signature (an optional `opts` stays optional).
 */
export function defineDriver<Factory extends (...args: never[]) => QueueDriver>(factory: Factory): Factory {
  return factory;
}
