import { fileURLToPath } from "node:url";
import type { QueueDriver } from "../src/driver";
import { optionError, showValue } from "../src/check";
import type { VQueueError } from "../src/errors";
import { DEFAULT_DIR } from "./defaults";
import fsDriver from "./drivers/fs";
import memoryDriver from "./drivers/memory";

export { DEFAULT_DIR, NITRO_DEFAULT_DIR } from "./defaults";

/**
 * The storage specs `resolveStorageDriver` understands (the server's and the CLI's `--storage`).
 */
export const STORAGE_SPECS = [
  "./queues, /var/lib/queues, fs:./queues, file:///var/lib/queues  (files, byte-compatible with the crate)",
  "memory:  or  memory:<name>  (this process only)",
  "redis://[user:pass@]host:port/db[?base=prefix]  or  rediss://...  (unstorage's redis driver; needs unstorage and ioredis)",
  "unstorage-fs:./dir  (unstorage's fs driver; needs unstorage)",
  "unstorage-memory:  (unstorage's memory driver; needs unstorage)",
] as const;

/** What an adapter's options say about the storage: a driver, a storage spec, or a data directory. */
export interface DriverSource {
  driver?: QueueDriver;
  /** A spec for `resolveStorageDriver` (`memory:`, `redis://...`, ...). */
  storage?: string;
  /** Data directory of the fs driver. */
  dir?: string;
}

/**
 * The one place an adapter's options become a driver: `driver` if given, else the `storage`
 * spec, else the fs driver on `dir` (`defaultDir` when not given: `DEFAULT_DIR` for the CLI and
 * the server, `NITRO_DEFAULT_DIR` for Nitro). An empty `storage` or `dir` counts as not given:
 * an env variable can be emptied, not removed.
 */
export async function resolveDriver(source: DriverSource, defaultDir: string = DEFAULT_DIR): Promise<QueueDriver> {
  if (source.driver) return source.driver;
  if (source.storage) return resolveStorageDriver(source.storage);
  return fsDriver({ dir: fsDataDir(source, defaultDir) });
}

/** The directory the fs driver of `resolveDriver` will use, or undefined when the storage is something else. */
export function fsDataDir(source: DriverSource, defaultDir: string = DEFAULT_DIR): string | undefined {
  return source.driver || source.storage ? undefined : source.dir || defaultDir;
}

/**
 * Turns a storage spec into a driver: a path or `fs:` gives the fs driver, `memory:` the
 * memory driver, `redis://` an unstorage Redis storage under the unstorage driver, and so
 * on (see `STORAGE_SPECS`). A driver passed in is returned as is. unstorage and ioredis are
 * imported only when a spec needs them. The driver's `dispose()` closes what it opened.
 *
 * @example
 * const driver = await resolveStorageDriver(process.env.VQ_STORAGE ?? DEFAULT_DIR);
 * const queue = await openQueue("orders", { driver });
 */
export async function resolveStorageDriver(spec: string | QueueDriver): Promise<QueueDriver> {
  if (typeof spec !== "string") {
    if (spec && typeof spec.openLog === "function" && typeof spec.lock === "function") return spec;
    throw specError(spec);
  }
  const text = spec.trim();
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(text)?.[1]?.toLowerCase();
  // No scheme (or a Windows drive letter): a directory.
  if (!scheme || scheme.length === 1) {
    if (!text) throw specError(spec);
    return fsDriver({ dir: text });
  }
  const rest = text.slice(scheme.length + 1);
  switch (scheme) {
    case "fs": {
      if (!rest) throw specError(spec);
      return fsDriver({ dir: rest });
    }
    case "file": {
      return fsDriver({ dir: fileURLToPath(text) });
    }
    case "memory": {
      return memoryDriver(rest ? { name: rest } : {});
    }
    case "redis":
    case "rediss": {
      const url = new URL(text);
      const base = url.searchParams.get("base") ?? "vq";
      url.searchParams.delete("base");
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      const redisDriver = (await importOptional("ioredis", () => import("unstorage/drivers/redis"))).default;
      // SCAN 1000 keys per round trip (the default, 10, makes listing a large keyspace slow).
      const storage = createStorage({ driver: redisDriver({ url: url.href, scanCount: 1000 }) });
      return unstorageBacked(storage, { base, key: `redis:${url.host}${url.pathname}` });
    }
    case "unstorage-fs": {
      if (!rest) throw specError(spec);
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      const unstorageFs = (await importOptional("unstorage", () => import("unstorage/drivers/fs"))).default;
      return unstorageBacked(createStorage({ driver: unstorageFs({ base: rest }) }), { key: `unstorage-fs:${rest}` });
    }
    case "unstorage-memory": {
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      return unstorageBacked(createStorage(), {});
    }
    default: {
      throw specError(spec);
    }
  }
}

// --- Internal helpers ---

async function unstorageBacked(storage: import("unstorage").Storage, options: { base?: string; key?: string }): Promise<QueueDriver> {
  const { default: unstorageDriver } = await import("./drivers/unstorage");
  return unstorageDriver({ storage, disposeStorage: true, ...options });
}

async function importOptional<T>(name: string, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException)?.code === "ERR_MODULE_NOT_FOUND" || /Cannot find (module|package)/.test(String(error));
    if (!missing) throw error;
    throw optionError(`Cannot import \`${name}\`. Install it (npm i unstorage${name === "ioredis" ? " ioredis" : ""}) to use this storage.`, { cause: error });
  }
}

function specError(spec: unknown): VQueueError {
  return optionError(`Invalid storage ${showValue(spec)}: use one of\n  ${STORAGE_SPECS.join("\n  ")}`);
}
