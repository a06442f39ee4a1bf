import type { LogFile, QueueDriver, RecordFile } from "../core/driver";

/**
 * Open files shared by everyone in this process on the same storage: the writer of a queue
 * and all its consumers use one handle per part log and per info record, instead of one each
 * (300 consumers of a queue hold a few descriptors, not 1,200). Reads and appends are
 * positional, so holders do not disturb each other; the file is closed when the last holder
 * lets go. A path removed and created again while held keeps the old file: part ids only
 * grow, and info records are replaced in place, never removed while a queue lives.
 */
interface Closable {
  close(): Promise<void>;
}

interface Entry {
  handle: Promise<Closable | undefined>;
  refs: number;
}

const entries = new Map<string, Entry>();

/** The part log at `path`, shared (see above); each call's handle is released by its own `close()`. */
export function openSharedLog(driver: QueueDriver, path: string, options: { create: boolean }): Promise<LogFile | undefined> {
  return openShared(
    driver,
    "log",
    path,
    options,
    () => driver.openLog(path, options),
    (handle, close) => ({
      size: () => handle.size(),
      read: (position, length) => handle.read(position, length),
      append: (at, data, fence) => handle.append(at, data, fence),
      truncate: (length, fence) => handle.truncate(length, fence),
      sync: () => handle.sync(),
      close,
    }),
  );
}

/** Runs `use` on the part log at `path` (shared, let go after), or gives undefined when it does not exist. */
export async function withSharedLog<T>(driver: QueueDriver, path: string, use: (log: LogFile) => Promise<T>): Promise<T | undefined> {
  const log = await openSharedLog(driver, path, { create: false });
  if (!log) return undefined;
  try {
    return await use(log);
  } finally {
    await log.close();
  }
}

/** The info record at `path`, shared (see above). */
export function openSharedRecord(driver: QueueDriver, path: string, options: { create: boolean }): Promise<RecordFile | undefined> {
  return openShared(
    driver,
    "record",
    path,
    options,
    () => driver.openRecord(path, options),
    (handle, close) => ({
      read: () => handle.read(),
      replace: (data, fence) => handle.replace(data, fence),
      sync: () => handle.sync(),
      close,
    }),
  );
}

/**
 * Opens (with `create`, makes) or joins the handle already open; undefined when it does not
 * exist. `wrap` gives each caller its own view whose `close` lets go of one reference.
 */
async function openShared<T extends Closable>(
  driver: QueueDriver,
  kind: string,
  path: string,
  options: { create: boolean },
  open: () => Promise<T | undefined>,
  wrap: (handle: T, close: () => Promise<void>) => T,
): Promise<T | undefined> {
  const key = `${driver.storageKey}\u0000${kind}\u0000${path}`;
  let entry = entries.get(key);
  if (!entry) {
    entry = { handle: open(), refs: 0 };
    entries.set(key, entry);
  }
  entry.refs++;
  let handle: T | undefined;
  try {
    handle = (await entry.handle) as T | undefined;
  } catch (error) {
    forget(key, entry);
    throw error;
  }
  if (!handle) {
    // Missing when a holder without `create` opened it; this caller may create it.
    forget(key, entry);
    return options.create ? openShared(driver, kind, path, options, open, wrap) : undefined;
  }
  const joined = entry;
  let released = false;
  return wrap(handle, async () => {
    if (released) return;
    released = true;
    if (--joined.refs > 0) return;
    if (entries.get(key) === joined) entries.delete(key);
    await handle.close();
  });
}

/**
 * Forgets the shared handles of files that were just removed (`removed` says which paths), so
 * that a queue deleted and created again in this process opens its new files, not the old
 * ones (on fs an open descriptor keeps an unlinked file). Holders keep theirs until they close.
 */
export function forgetShared(driver: QueueDriver, removed: (path: string) => boolean): void {
  const prefix = `${driver.storageKey}\u0000`;
  for (const key of [...entries.keys()]) {
    if (!key.startsWith(prefix)) continue;
    const path = key.slice(key.indexOf("\u0000", prefix.length) + 1);
    if (removed(path)) entries.delete(key);
  }
}

/** Drops one reference to an entry whose open gave no handle (or failed). */
function forget(key: string, entry: Entry): void {
  entry.refs--;
  if (entry.refs === 0 && entries.get(key) === entry) entries.delete(key);
}
