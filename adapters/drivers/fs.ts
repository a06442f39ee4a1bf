import { constants, readSync, watch as fsWatch, writeSync } from "node:fs";
import { mkdir, open, readFile, readdir, rename, rm, type FileHandle as NodeFileHandle } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "pathe";
import { defineDriver, type LogFile, type RecordFile } from "../../src/driver";
import { optionError } from "../../src/check";
import { ioError, VQueueError } from "../../src/errors";
import { DEFAULT_DIR } from "../defaults";
import { acquirePidLock, isPidLockHeld } from "./utils/pid-lock";

const DRIVER_NAME = "fs";

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
   * machine. This is what keeps a push-to-consumer delivery under a millisecond.
   * `fdatasync` always runs in the pool. 0 sends every read and write through the pool
   * (for storage where a single small write can block, e.g. a network filesystem).
   * @default 65536
   */
  inlineIOBytes?: number;
}

/**
 * Queues in real files through Node's `fs`, byte for byte as the crate writes them.
 * Writes are positional (`pwrite`) and whole (short writes are continued); `sync` is
 * `fdatasync`; locks are pid lock files that die with their process.
 */
const fsDriver = defineDriver((options: FsDriverOptions = {}) => {
  // Bundled for workerd, node:fs is a stub (or a per-request memory file system): refuse at once, not at every call.
  if ((globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers") {
    throw optionError(`The fs driver cannot run in Cloudflare Workers: there is no file system that outlives a request. Set the storage: "memory:" (this isolate only, lost when it is evicted), or see the README, "Nitro presets".`);
  }
  const base = resolve(options.dir ?? DEFAULT_DIR);
  const inlineIOBytes = options.inlineIOBytes ?? 65_536;
  if (!Number.isSafeInteger(inlineIOBytes) || inlineIOBytes < 0) {
    throw optionError(`Invalid option of the fs driver: inlineIOBytes must be an integer >= 0 (got ${String(inlineIOBytes)}).`);
  }
  let ready: Promise<unknown> | undefined;
  const ensureBase = () => (ready ??= mkdir(base, { recursive: true }).catch(fail));
  const abs = (path: string) => {
    const full = resolve(base, path);
    const rel = relative(base, full);
    if (rel.startsWith("..") || isAbsolute(rel)) {
      throw new VQueueError("E_NAME", `Path ${JSON.stringify(path)} is outside the data directory of the fs driver.`);
    }
    return full;
  };

  /** Opens for positional reads and writes; with `create`, makes it (empty) if missing. */
  const openFile = async (path: string, create: boolean): Promise<NodeFileHandle | undefined> => {
    await ensureBase();
    const full = abs(path);
    try {
      return await open(full, "r+");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") fail(error);
      if (!create) return undefined;
    }
    // O_CREAT without O_TRUNC or O_APPEND: "w+" would truncate, "a+" ignores write positions.
    return open(full, constants.O_RDWR | constants.O_CREAT, 0o644).catch(fail);
  };

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${base}`,
    async openLog(path, { create }) {
      const handle = await openFile(path, create);
      return handle && createLog(handle, inlineIOBytes);
    },
    async openRecord(path, { create }) {
      const handle = await openFile(path, create);
      return handle && createRecord(handle);
    },
    async readRecord(path) {
      try {
        return await readFile(abs(path));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
        return fail(error);
      }
    },
    async list(dir) {
      try {
        return await readdir(abs(dir));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        return fail(error);
      }
    },
    async mkdir(dir) {
      await mkdir(abs(dir), { recursive: true }).catch(fail);
    },
    async remove(path) {
      await rm(abs(path), { recursive: true, force: true }).catch(fail);
    },
    async lock(path) {
      await ensureBase();
      return acquirePidLock(abs(path)).catch(fail);
    },
    async isLocked(path) {
      return isPidLockHeld(abs(path)).catch(fail);
    },
    async writeAtomic(path, data, { sync }) {
      const full = abs(path);
      // A temporary name of this process's own, then a rename: readers see all of it or none.
      const temp = `${full}.tmp-${process.pid}`;
      try {
        const handle = await open(temp, "w");
        try {
          await writeAt(handle, 0, data, 0);
          if (sync) await handle.datasync();
        } finally {
          await handle.close();
        }
        await rename(temp, full);
      } catch (error) {
        await rm(temp, { force: true }).catch(() => {});
        fail(error);
      }
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

/** Every failure of the file system leaves the driver as `E_IO`, the system's error as `cause`. */
function fail(error: unknown): never {
  throw ioError(DRIVER_NAME, error);
}

function createLog(handle: NodeFileHandle, inlineIOBytes: number): LogFile {
  return {
    async size() {
      return (await handle.stat().catch(fail)).size;
    },
    read: (position, length) => readAt(handle, position, length, inlineIOBytes),
    append: (at, data) => writeAt(handle, at, data, inlineIOBytes),
    async truncate(length) {
      await handle.truncate(length).catch(fail);
    },
    async sync() {
      await handle.datasync().catch(fail);
    },
    async close() {
      await handle.close().catch(fail);
    },
  };
}

/** An info line's file, rewritten in place at offset 0 as the crate does (never renamed over). */
function createRecord(handle: NodeFileHandle): RecordFile {
  return {
    // Info lines are short; the crate's leftovers after the first line are read too, and ignored.
    read: () => readAt(handle, 0, RECORD_READ, RECORD_READ),
    replace: (data) => writeAt(handle, 0, data, RECORD_READ),
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

async function readAt(handle: NodeFileHandle, position: number, length: number, inlineIOBytes: number): Promise<Uint8Array> {
  const buffer = Buffer.allocUnsafe(length);
  const inline = length <= inlineIOBytes;
  let filled = 0;
  try {
    while (filled < length) {
      const bytesRead = inline ? readSync(handle.fd, buffer, filled, length - filled, position + filled) : (await handle.read(buffer, filled, length - filled, position + filled)).bytesRead;
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
  } catch (error) {
    fail(error);
  }
  // A plain Uint8Array view: cheaper to slice than a Buffer, and the same on every driver.
  return new Uint8Array(buffer.buffer, buffer.byteOffset, filled);
}

async function writeAt(handle: NodeFileHandle, position: number, data: Uint8Array, inlineIOBytes: number): Promise<void> {
  const inline = data.length <= inlineIOBytes;
  let written = 0;
  try {
    // A short write is continued, never ignored (FORMAT.md, bug 7).
    while (written < data.length) {
      written += inline ? writeSync(handle.fd, data, written, data.length - written, position + written) : (await handle.write(data, written, data.length - written, position + written)).bytesWritten;
    }
  } catch (error) {
    fail(error);
  }
}
