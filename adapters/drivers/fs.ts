// Over 300 lines: the one QueueDriver on node:fs (logs, records, listing, locks, watch), each call
// a few lines, kept together so that the driver reads as its interface does.
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, renameSync, statSync, watch as fsWatch, writeSync } from "node:fs";
import { mkdir, open, readFile, readdir, rename, rm, stat } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "pathe";
import { defineDriver, type LogFile, type RecordFile } from "../../src/core/driver";
import { optionError } from "../../src/core/check";
import { ioError, VQueueError } from "../../src/core/errors";
import { DEFAULT_DIR } from "../defaults";
import type { DriverLock } from "../../src/core/driver";
import { acquireFsLeaseLock, fencedFsWrite, isFsLeaseLockHeld } from "./utils/fs-lease-lock";
import { acquirePidLock, isPidLockHeld } from "./utils/pid-lock";
import { handNativeCrc32 } from "../native-crc32";
import { Descriptor, openDescriptor } from "./utils/descriptor";

const DRIVER_NAME = "fs";

// Whoever stores on files here is on Node (or Bun, Deno): the engine's CRC-32 goes native.
handNativeCrc32();

export interface FsDriverOptions {
  /**
   * The data directory: queues are files right inside it, as the crate lays them out.
   * Created if missing.
   * @default "./queues"
   */
  dir?: string;
  /**
   * Reads and writes of at most this many bytes run on the calling thread: a small
   * `pwrite` or `pread` against the page cache takes microseconds, while a round trip
   * through libuv's thread pool costs a tenth of a millisecond, and several on a busy
   * machine. This is what keeps a push-to-consumer delivery under a millisecond, and a
   * sample of 10,000 position files (the dashboard, `/metrics`) within a few tens of ms:
   * a whole small file (`readRecord`) is opened, measured, read and closed there too, and
   * the files the engine keeps open are opened and closed there (a seek opens a few).
   * The default covers the engine's largest usual I/O, a consumer's 1 MiB read chunk and a
   * writer's 1 MiB batch buffer: against the page cache such a call takes 0.2-0.3 ms on the
   * calling thread, less than the same call through the pool, which also costs the handoff's CPU.
   * `fdatasync` always runs in the pool. 0 sends every open, read, write and close through the pool
   * (for storage where a single small write can block, e.g. a network filesystem).
   * @default 1048576
   */
  inlineIOBytes?: number;
  /**
   * Locks that run out: a holder that is alive but not running (SIGSTOP, a frozen container, a
   * stall) for this many ms loses its locks to the other processes of this host, and its writes
   * are fenced once it runs again (`E_FENCED`; utils/fs-lease-lock.ts). Without it (the
   * default), a lock is held as long as its process lives, paused or not, and is free at once
   * when it dies. Every process on one directory should use the same setting.
   */
  lockLeaseMs?: number;
}

/**
 * Queues in real files through Node's `fs`, byte for byte as the crate writes them.
 * Writes are positional (`pwrite`) and whole (short writes are continued); `sync` is
 * `fdatasync`; locks are pid lock files that die with their process, and with `lockLeaseMs`
 * also run out, the writes of a holder that lost its lock refused.
 */
const fsDriver = defineDriver((options: FsDriverOptions = {}) => {
  // Bundled for workerd, node:fs is a stub (or a per-request memory file system): refuse at once, not at every call.
  if ((globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers") {
    throw optionError(
      `The fs driver cannot run in Cloudflare Workers: there is no file system that outlives a request. Set the storage: "memory:" (this isolate only, lost when it is evicted), or see docs/nitro-nuxt.md#nitro-presets-bun-deno-cloudflare-workers.`,
    );
  }
  const base = resolve(options.dir ?? DEFAULT_DIR);
  const inlineIOBytes = options.inlineIOBytes ?? 1_048_576;
  if (!Number.isSafeInteger(inlineIOBytes) || inlineIOBytes < 0) {
    throw optionError(`Invalid option of the fs driver: inlineIOBytes must be an integer >= 0 (got ${String(inlineIOBytes)}).`);
  }
  const leaseMs = options.lockLeaseMs;
  if (leaseMs !== undefined && (!Number.isSafeInteger(leaseMs) || leaseMs < MIN_LEASE_MS || leaseMs > MAX_LEASE_MS)) {
    throw optionError(
      `Invalid option of the fs driver: lockLeaseMs must be an integer from ${MIN_LEASE_MS} to ${MAX_LEASE_MS} (ms), or left out for locks held as long as their process lives (got ${String(leaseMs)}).`,
    );
  }
  /**
   * A write by a lock's holder: with leases, checked against the lock inside its write mutex, and
   * made there with synchronous calls (`underFence`): a holder paused inside the mutex delays a
   * takeover until it runs again, so the mutex is held for a few system calls, never for a turn
   * of the thread pool queued behind other files' fsyncs.
   */
  const fenced: Fenced = (fence, write) =>
    fence && leaseMs !== undefined
      ? fencedFsWrite(fence, () => write(true)).catch((error) => (VQueueError.isError(error) ? Promise.reject(error) : fail(error)))
      : write(false);
  let ready: Promise<unknown> | undefined;
  const ensureBase = () => (ready ??= mkdir(base, { recursive: true }).catch(fail));
  const abs = (path: string) => {
    // Engine paths (names checked, `/` between): joined as they are, without resolving.
    if (PLAIN_PATH.test(path)) return `${base}/${path}`;
    const full = resolve(base, path);
    const rel = relative(base, full);
    if (rel.startsWith("..") || isAbsolute(rel)) {
      throw new VQueueError("E_NAME", `Path ${JSON.stringify(path)} is outside the data directory of the fs driver.`);
    }
    return full;
  };

  /**
   * Opens for positional reads and writes; with `create`, makes it (empty) if missing. On the
   * calling thread unless all I/O goes through the pool: a seek opens and closes a few files,
   * and each trip through the pool waits for a core on a busy machine (milliseconds at p99).
   */
  const openFile = async (path: string, create: boolean): Promise<Descriptor | undefined> => {
    await ensureBase();
    const full = abs(path);
    const inline = inlineIOBytes > 0;
    try {
      return await openDescriptor(full, constants.O_RDWR, inline);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") fail(error);
      if (!create) return undefined;
    }
    // O_CREAT without O_TRUNC or O_APPEND: "w+" would truncate, "a+" ignores write positions.
    return openDescriptor(full, constants.O_RDWR | constants.O_CREAT, inline).catch(fail);
  };

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${base}`,
    async openLog(path, { create }) {
      const handle = await openFile(path, create);
      return handle && createLog(handle, inlineIOBytes, fenced);
    },
    async openRecord(path, { create }) {
      const handle = await openFile(path, create);
      return handle && createRecord(handle, fenced);
    },
    async readRecord(path) {
      const full = abs(path);
      try {
        // open, fstat, read, close: four trips through the pool for a line of 60 bytes, unless inline.
        return (inlineIOBytes > 0 ? readSmallFileSync(full, inlineIOBytes) : undefined) ?? (await readFile(full));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        return fail(error);
      }
    },
    async sizeOf(path) {
      const full = abs(path);
      try {
        return (inlineIOBytes > 0 ? statSync(full) : await stat(full)).size;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        return fail(error);
      }
    },
    async list(dir) {
      try {
        // Names with a `~` are the driver's own (leased locks' owner files and write mutexes); no queue file has one.
        return (await readdir(abs(dir))).filter((name) => !name.includes("~"));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        return fail(error);
      }
    },
    async mkdir(dir) {
      await mkdir(abs(dir), { recursive: true }).catch(fail);
    },
    async remove(path, fence) {
      const full = abs(path);
      if (!fence || leaseMs === undefined) return void (await rm(full, { recursive: true, force: true }).catch(fail));
      // Inside the mutex only a rename (a part's files can take a while to delete): the `~` name is not listed.
      const aside = `${full}~removed-${process.pid}-${Date.now().toString(36)}`;
      const moved = await fenced(fence, async () => renameSyncIfThere(full, aside));
      if (moved) await rm(aside, { recursive: true, force: true }).catch(fail);
    },
    async lock(path) {
      await ensureBase();
      if (leaseMs !== undefined) return acquireFsLeaseLock(abs(path), path, leaseMs).catch(fail);
      return acquirePidLock(abs(path)).catch(fail);
    },
    async isLocked(path) {
      return (leaseMs === undefined ? isPidLockHeld(abs(path), inlineIOBytes > 0) : isFsLeaseLockHeld(abs(path), leaseMs)).catch(fail);
    },
    writeAtomic(path, data, { sync, fence }) {
      const full = abs(path);
      // Written and synced before the mutex; inside it, only the rename.
      return writeWhole(full, data, sync, (temp) =>
        fenced(fence, async (underFence) => (underFence ? void renameSyncIfThere(temp, full, true) : rename(temp, full))),
      );
    },
    async syncDir(dir) {
      try {
        const handle = await open(abs(dir), "r");
        try {
          await handle.sync();
        } finally {
          await handle.close();
        }
      } catch (error) {
        fail(error);
      }
    },
    watch(dir, onChange) {
      try {
        const watcher = fsWatch(abs(dir), { persistent: false, recursive: false }, (_event, name) => onChange(name ?? undefined));
        watcher.on("error", () => {});
        return () => watcher.close();
      } catch {
        return undefined;
      }
    },
  };
});

export default fsDriver;

// --- Internal helpers ---

/** The fs driver's range of `lockLeaseMs`: a second or more (renewals every third of it, through event-loop stalls), below a day. */
const MIN_LEASE_MS = 1000;
const MAX_LEASE_MS = 86_400_000;

/** Runs a write, fenced by `fence` when given with leases; `underFence`: inside the mutex, where its calls are synchronous. */
type Fenced = <T>(fence: DriverLock | undefined, write: (underFence: boolean) => Promise<T>) => Promise<T>;

/** Replaces the file at `full` whole: readers see all of it or none. `place` puts the written temporary file there. */
async function writeWhole(full: string, data: Uint8Array, sync: boolean, place: (temp: string) => Promise<void>): Promise<void> {
  // A temporary name of this process's own, then a rename: readers see all of it or none.
  const temp = `${full}~tmp-${process.pid}`; // a `~`: not listed (a reader of the directory never takes it for a queue's or consumer's file)
  try {
    const handle = await openDescriptor(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, false, 0o666);
    try {
      await writeAt(handle, 0, data, 0);
      if (sync) await handle.datasync();
    } finally {
      await handle.close();
    }
    await place(temp);
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {});
    if (VQueueError.isError(error)) throw error;
    fail(error);
  }
}

/** Every failure of the file system leaves the driver as `E_IO`, the system's error as `cause`. */
function fail(error: unknown): never {
  throw ioError(DRIVER_NAME, error);
}

/** Renames `from` to `to` (synchronous: inside a write mutex); false when `from` is not there, unless `required`. */
function renameSyncIfThere(from: string, to: string, required = false): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch (error) {
    if (!required && (error as NodeJS.ErrnoException).code === "ENOENT") return false;
    fail(error);
  }
}

function truncateSync(handle: Descriptor, length: number): void {
  try {
    ftruncateSync(handle.fd, length);
  } catch (error) {
    fail(error);
  }
}

function createLog(handle: Descriptor, inlineIOBytes: number, fenced: Fenced): LogFile {
  return {
    // An fstat of an open file is quick: on the calling thread too unless all I/O goes through the pool.
    async size() {
      try {
        return (inlineIOBytes > 0 ? fstatSync(handle.fd) : await handle.stat()).size;
      } catch (error) {
        return fail(error);
      }
    },
    read: (position, length) => readAt(handle, position, length, inlineIOBytes),
    append: (at, data, fence) => fenced(fence, (underFence) => writeAt(handle, at, data, underFence ? Number.POSITIVE_INFINITY : inlineIOBytes)),
    truncate: (length, fence) => fenced(fence, async (underFence) => (underFence ? truncateSync(handle, length) : handle.truncate(length).catch(fail))),
    async sync() {
      await handle.datasync().catch(fail);
    },
    async close() {
      await handle.close().catch(fail);
    },
  };
}

/** An info line's file, rewritten in place at offset 0 as the crate does (never renamed over). */
function createRecord(handle: Descriptor, fenced: Fenced): RecordFile {
  return {
    // Info lines are short; the crate's leftovers after the first line are read too, and ignored.
    read: () => readAt(handle, 0, RECORD_READ, RECORD_READ),
    replace: (data, fence) => fenced(fence, (underFence) => writeAt(handle, 0, data, underFence ? Number.POSITIVE_INFINITY : RECORD_READ)),
    async sync() {
      await handle.datasync().catch(fail);
    },
    async close() {
      await handle.close().catch(fail);
    },
  };
}

/** Bytes read of an info record: its line is far shorter (two names of at most 128 characters and three numbers). */
const RECORD_READ = 1024;

async function readAt(handle: Descriptor, position: number, length: number, inlineIOBytes: number): Promise<Uint8Array> {
  const buffer = Buffer.allocUnsafe(length);
  const inline = length <= inlineIOBytes;
  let filled = 0;
  try {
    while (filled < length) {
      const bytesRead = inline
        ? readSync(handle.fd, buffer, filled, length - filled, position + filled)
        : (await handle.read(buffer, filled, length - filled, position + filled)).bytesRead;
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
  } catch (error) {
    fail(error);
  }
  // A plain Uint8Array view: cheaper to slice than a Buffer, and the same on every driver.
  return new Uint8Array(buffer.buffer, buffer.byteOffset, filled);
}

/** A whole file of at most `limit` bytes, read with synchronous calls; undefined when larger. Throws as `readFile` does (ENOENT, EISDIR). */
/** A relative path of names that cannot leave the base: each starts with neither `.` nor `/`, none is empty, no backslash. */
const PLAIN_PATH = /^[\w~-][\w.~-]*(?:\/[\w~-][\w.~-]*)*$/;

/** A first read this long gives most small files (info lines, positions) whole, without an fstat. */
const FIRST_READ_BYTES = 4096;
const firstRead = new Uint8Array(FIRST_READ_BYTES);

function readSmallFileSync(full: string, limit: number): Uint8Array | undefined {
  const fd = openSync(full, "r");
  try {
    // A regular file's read comes back short only at its end: fewer bytes than asked is the whole file.
    const asked = Math.min(FIRST_READ_BYTES, limit + 1);
    const got = readSync(fd, firstRead, 0, asked, 0);
    if (got < asked) return firstRead.slice(0, got);
    if (got > limit) return undefined;
    const size = fstatSync(fd).size;
    if (size > limit) return undefined;
    const buffer = Buffer.allocUnsafe(size);
    let filled = 0;
    while (filled < size) {
      const bytesRead = readSync(fd, buffer, filled, size - filled, filled);
      if (bytesRead === 0) break; // shrunk since fstat: what is there
      filled += bytesRead;
    }
    return buffer.subarray(0, filled);
  } finally {
    closeSync(fd);
  }
}

async function writeAt(handle: Descriptor, position: number, data: Uint8Array, inlineIOBytes: number): Promise<void> {
  const inline = data.length <= inlineIOBytes;
  let written = 0;
  try {
    // A short write is continued, never ignored (docs/format.md#where-the-crate-027-goes-wrong, fault 7).
    while (written < data.length) {
      written += inline
        ? writeSync(handle.fd, data, written, data.length - written, position + written)
        : (await handle.write(data, written, data.length - written, position + written)).bytesWritten;
    }
  } catch (error) {
    fail(error);
  }
}
