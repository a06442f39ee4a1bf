/**
 * The storage a queue lives on: the few file operations the engine needs and no more.
 * Paths are relative to the driver's base, `/`-separated, never absolute, never `..`.
 *
 * Drivers: `v-queue/drivers/fs` (Node's fs, the default on Node), `v-queue/drivers/memory`.
 */
export interface QueueDriver {
  /** Short name for messages, e.g. "fs". */
  readonly name: string;
  /** Opens a file for positional reads and writes; `create` makes it (empty) if missing. */
  open(path: string, options: { create: boolean }): Promise<FileHandle | undefined>;
  /** Reads a whole small file (info lines), or undefined if it does not exist. */
  readFile(path: string): Promise<Uint8Array | undefined>;
  /** Names in a directory ("" is the base), or [] when it does not exist. */
  list(dir: string): Promise<string[]>;
  /** Creates a directory and its parents. */
  mkdir(dir: string): Promise<void>;
  /** Removes a file or a directory tree; no error when missing. */
  remove(path: string): Promise<void>;
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
  /** Makes a directory's entries durable (new files and parts). Optional. */
  syncDir?(dir: string): Promise<void>;
  /**
   * Calls `onChange` when files under `dir` may have changed, and returns a stop
   * function. Optional: without it, consumers in other processes poll the info file.
   */
  watch?(dir: string, onChange: () => void): () => void;
  /**
   * A key that is equal for two driver instances on the same storage, so that writers
   * and consumers in one process find each other (wake-ups without I/O).
   */
  readonly storageKey: string;
  /** Frees resources (watchers, connections). */
  dispose?(): Promise<void>;
}

export interface FileHandle {
  /** Current size in bytes. */
  size(): Promise<number>;
  /** Reads up to `length` bytes at `position`; shorter at the end of the file. */
  read(position: number, length: number): Promise<Uint8Array>;
  /** Writes all of `data` at `position`. */
  write(position: number, data: Uint8Array): Promise<void>;
  /** Cuts the file to `length` bytes. */
  truncate(length: number): Promise<void>;
  /** Makes written data durable (fdatasync). */
  sync(): Promise<void>;
  close(): Promise<void>;
}

export interface DriverLock {
  release(): Promise<void>;
  /**
   * Aborted once the lock is known to be lost (a lease that ran out and was taken by another
   * holder), with the error as its reason. Drivers whose locks cannot be lost leave it out.
   */
  readonly lost?: AbortSignal;
  /**
   * Resolves while the lock is surely held; rejects (`E_LOCKED`) once it is lost. A holder
   * calls it before each write, so that a holder that was paused past its lease (SIGSTOP, a
   * long GC, a suspended VM) finds out before it writes, not after. Cheap while the lease is
   * fresh. Drivers whose locks cannot be lost leave it out.
   */
  assertHeld?(): Promise<void>;
}

/**
 * A typed identity helper, unstorage-style: `export default defineDriver((opts = {}) => ({ ... }))`.
 * The factory keeps its own signature (an optional `opts` stays optional).
 */
export function defineDriver<Factory extends (...args: never[]) => QueueDriver>(factory: Factory): Factory {
  return factory;
}
