import { defineDriver, type DriverLock, type LogFile, type RecordFile } from "../../src/core/driver";
import { ioError } from "../../src/core/errors";

const DRIVER_NAME = "memory";

export interface MemoryDriverOptions {
  /**
   * Instances with the same name share one store in this process, like two handles on one
   * directory. Without a name each instance is a fresh, private store.
   */
  name?: string;
}

interface MemoryFile {
  data: Uint8Array;
  size: number;
}

interface MemoryStore {
  files: Map<string, MemoryFile>;
  dirs: Set<string>;
  locks: Set<string>;
  watchers: Set<() => void>;
}

const namedStores = new Map<string, MemoryStore>();
let anonymous = 0;

/** Keeps queues in this process's memory: for tests, previews and edge runtimes. Lost on exit. */
const memoryDriver = defineDriver((options: MemoryDriverOptions = {}) => {
  const id = options.name ?? `#${++anonymous}`;
  let store = options.name ? namedStores.get(options.name) : undefined;
  if (!store) {
    store = { files: new Map(), dirs: new Set([""]), locks: new Set(), watchers: new Set() };
    if (options.name) namedStores.set(options.name, store);
  }
  const { files, dirs, locks, watchers } = store;
  const changed = () => {
    for (const watcher of watchers) watcher();
  };

  const openFile = (path: string, create: boolean): MemoryFile | undefined => {
    let file = files.get(path);
    if (!file) {
      if (!create) return undefined;
      // As the fs driver reports a file created in a missing directory.
      if (!dirs.has(parentOf(path))) throw ioError(DRIVER_NAME, enoent(path));
      file = { data: new Uint8Array(64), size: 0 };
      files.set(path, file);
    }
    return file;
  };

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${id}`,
    async openLog(path, { create }) {
      const file = openFile(path, create);
      return file && createLog(file, changed);
    },
    async openRecord(path, { create }) {
      const file = openFile(path, create);
      return file && createRecord(file, changed);
    },
    async readRecord(path) {
      const file = files.get(path);
      return file ? file.data.slice(0, file.size) : undefined;
    },
    async writeAtomic(path, data) {
      // One map entry set at once: atomic by nature; a new file object, as a rename gives.
      if (!dirs.has(parentOf(path))) throw ioError(DRIVER_NAME, enoent(path));
      files.set(path, { data: data.slice(), size: data.length });
      changed();
    },
    async list(dir) {
      const prefix = dir ? `${dir}/` : "";
      const names = new Set<string>();
      for (const path of [...files.keys(), ...dirs]) {
        if (path && path.startsWith(prefix)) names.add(path.slice(prefix.length).split("/")[0]!);
      }
      return [...names];
    },
    async mkdir(dir) {
      const segments = dir.split("/");
      for (let i = 1; i <= segments.length; i++) dirs.add(segments.slice(0, i).join("/"));
    },
    async remove(path) {
      for (const key of [...files.keys()]) if (key === path || key.startsWith(`${path}/`)) files.delete(key);
      for (const key of [...dirs]) if (key && (key === path || key.startsWith(`${path}/`))) dirs.delete(key);
    },
    async lock(path): Promise<DriverLock | undefined> {
      if (locks.has(path)) return undefined;
      locks.add(path);
      let held = true;
      return {
        async release() {
          if (held) locks.delete(path);
          held = false;
        },
      };
    },
    async isLocked(path) {
      return locks.has(path);
    },
    watch(_dir, onChange) {
      watchers.add(onChange);
      return () => watchers.delete(onChange);
    },
  };
});

export default memoryDriver;

// --- Internal helpers ---

function createLog(file: MemoryFile, changed: () => void): LogFile {
  return {
    async size() {
      return file.size;
    },
    async read(position, length) {
      // A copy, as a real read would give: callers may keep it.
      return file.data.slice(position, Math.min(position + length, file.size));
    },
    async append(at, data) {
      writeAt(file, at, data);
      changed();
    },
    async truncate(length) {
      if (length < file.size) file.data.fill(0, length, file.size);
      else if (length > file.data.length) {
        const grown = new Uint8Array(length);
        grown.set(file.data.subarray(0, file.size));
        file.data = grown;
      }
      file.size = length;
    },
    async sync() {},
    async close() {},
  };
}

/** An info record, rewritten in place at offset 0 like the fs driver's (bytes after the new line may remain). */
function createRecord(file: MemoryFile, changed: () => void): RecordFile {
  return {
    async read() {
      return file.data.slice(0, file.size);
    },
    async replace(data) {
      writeAt(file, 0, data);
      changed();
    },
    async sync() {},
    async close() {},
  };
}

function writeAt(file: MemoryFile, position: number, data: Uint8Array): void {
  const end = position + data.length;
  if (end > file.data.length) {
    const grown = new Uint8Array(Math.max(end, file.data.length * 2));
    grown.set(file.data.subarray(0, file.size));
    file.data = grown;
  }
  if (position > file.size) file.data.fill(0, file.size, position);
  file.data.set(data, position);
  file.size = Math.max(file.size, end);
}

function parentOf(path: string): string {
  const cut = path.lastIndexOf("/");
  return cut < 0 ? "" : path.slice(0, cut);
}

function enoent(path: string): Error {
  return Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: "ENOENT" });
}
