import type { FileHandle, QueueDriver } from "./driver";

/**
 * Open files shared by everyone in this process on the same storage: the writer of a queue
 * and all its consumers use one handle per part file and per info file, instead of one each
 * (300 consumers of a queue hold a few descriptors, not 1,200). Reads and writes are
 * positional, so holders do not disturb each other; the file is closed when the last holder
 * lets go. A path removed and created again while held keeps the old file: part ids only
 * grow, and info files are rewritten in place, never replaced.
 */
interface Entry {
  handle: Promise<FileHandle | undefined>;
  refs: number;
}

const entries = new Map<string, Entry>();

/**
 * Opens `path` (and with `create`, makes it), or joins the handle already open; undefined
 * when it does not exist. Each call's handle is released by its own `close()`.
 */
export async function openShared(driver: QueueDriver, path: string, options: { create: boolean }): Promise<FileHandle | undefined> {
  const key = `${driver.storageKey}\u0000${path}`;
  let entry = entries.get(key);
  if (!entry) {
    entry = { handle: driver.open(path, options), refs: 0 };
    entries.set(key, entry);
  }
  entry.refs++;
  let handle: FileHandle | undefined;
  try {
    handle = await entry.handle;
  } catch (error) {
    forget(key, entry);
    throw error;
  }
  if (!handle) {
    // Missing when a holder without `create` opened it; this caller may create it.
    forget(key, entry);
    return options.create ? openShared(driver, path, options) : undefined;
  }
  return share(key, entry, handle);
}

/** Drops one reference to an entry whose open gave no handle (or failed). */
function forget(key: string, entry: Entry): void {
  entry.refs--;
  if (entry.refs === 0 && entries.get(key) === entry) entries.delete(key);
}

function share(key: string, entry: Entry, handle: FileHandle): FileHandle {
  let released = false;
  return {
    size: () => handle.size(),
    read: (position, length) => handle.read(position, length),
    write: (position, data) => handle.write(position, data),
    truncate: (length) => handle.truncate(length),
    sync: () => handle.sync(),
    async close() {
      if (released) return;
      released = true;
      if (--entry.refs > 0) return;
      if (entries.get(key) === entry) entries.delete(key);
      await handle.close();
    },
  };
}

/** Handles open through `openShared` right now (for tests that count descriptors). */
export function sharedHandleCount(): number {
  return entries.size;
}
