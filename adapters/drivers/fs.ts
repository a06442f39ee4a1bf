import { constants, readSync, watch as fsWatch, writeSync } from "node:fs";
import { mkdir, open, readFile, readdir, rm, type FileHandle as NodeFileHandle } from "node:fs/promises";
import { isAbsolute, relative, resolve } from "pathe";
import { defineDriver, type FileHandle } from "../../src/driver";
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

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${base}`,
    async open(path, { create }) {
      await ensureBase();
      const full = abs(path);
      try {
        return createHandle(await open(full, "r+"), inlineIOBytes);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOENT") fail(error);
        if (!create) return undefined;
      }
      // O_CREAT without O_TRUNC or O_APPEND: "w+" would truncate, "a+" ignores write positions.
      return createHandle(await open(full, constants.O_RDWR | constants.O_CREAT, 0o644).catch(fail), inlineIOBytes);
    },
    async readFile(path) {
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
        const watcher = fsWatch(abs(dir), { persistent: false, recursive: false }, () => onChange());
        watcher.on("error", () => {});
        return () => watcher.close();
      } catch {
        return () => {};
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

function createHandle(handle: NodeFileHandle, inlineIOBytes: number): FileHandle {
  return {
    async size() {
      return (await handle.stat().catch(fail)).size;
    },
    async read(position, length) {
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
    },
    async write(position, data) {
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
    },
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
