// Over 300 lines: every storage spec a user can write (a dir, fs://, memory://, redis[+vq]://,
// unstorage://, a driver object) turned into one driver, with the error that says what is allowed,
// in one place.
import { fileURLToPath } from "node:url";
import type { QueueDriver } from "../src/core/driver";
import { optionError, showValue } from "../src/core/check";
import type { VQueueError } from "../src/core/errors";
import { DEFAULT_DIR } from "./defaults";
import fsDriver from "./drivers/fs";
import memoryDriver from "./drivers/memory";
import type { DurableObjectNamespace } from "./drivers/utils/durable-object-types";
import type { UnstorageDriverOptions } from "./drivers/unstorage";
import { inWorkerd } from "../runtime/options";

export { DEFAULT_DIR, NITRO_DEFAULT_DIR } from "./defaults";

/**
 * The storage specs `resolveStorageDriver` understands (the server's and the CLI's `--storage`).
 */
export const STORAGE_SPECS = [
  "./queues, /var/lib/queues, fs:./queues, file:///var/lib/queues  (files, byte-compatible with the crate; fs:./queues?lease=5000: locks that run out after 5 s without their holder running, its late writes refused)",
  "memory:  or  memory:<name>  (this process only)",
  "redis://[user:pass@]host:port/db[?base=prefix&lease=10000&instances=many]  or  rediss://...  (unstorage's redis driver, one instance unless instances=many: it cannot fence writes; needs unstorage and ioredis)",
  "redis+vq://[user:pass@]host:port/db[?prefix=vq&cluster=1&lease=10000&replicas=N]  or  rediss+vq://...  (v-queue's redis driver, fenced writes; cluster=1: host:port is a cluster node; needs ioredis)",
  "redis+vq+sentinel://[user:pass@]host:port,host:port,.../db?name=mymaster[&prefix=vq&lease=10000&replicas=N]  (v-queue's redis driver on the master that Redis Sentinel names; the hosts are sentinels, port 26379 if left out; user:pass is the data nodes'; needs ioredis)",
  "unstorage-fs:./dir[?lease=10000&instances=many]  (unstorage's fs driver, one instance unless instances=many; needs unstorage)",
  "unstorage-memory:  (unstorage's memory driver; needs unstorage)",
  "durable-object:BINDING[?prefix=vq&lease=3000&poll=1000]  (Cloudflare Durable Objects: the Worker's namespace binding BINDING of the VQueueObject class; in workerd only, e.g. Nitro's cloudflare-module preset)",
] as const;

/** What an adapter's options say about the storage: a driver, a storage spec, or a data directory. */
export interface DriverSource {
  driver?: QueueDriver;
  /** A spec for `resolveStorageDriver` (`memory:`, `redis://...`, ...). */
  storage?: string;
  /** Data directory of the fs driver. */
  dir?: string;
  /** The Worker's env (its bindings), for a `durable-object:` spec. */
  env?: WorkerEnv;
}

/** A Cloudflare Worker's env: its bindings by name. */
export type WorkerEnv = Record<string, unknown>;

/**
 * The one place an adapter's options become a driver: `driver` if given, else the `storage`
 * spec, else the fs driver on `dir` (`defaultDir` when not given: `DEFAULT_DIR` for the CLI and
 * the server, `NITRO_DEFAULT_DIR` for Nitro). An empty `storage` or `dir` counts as not given:
 * an env variable can be emptied, not removed.
 */
export async function resolveDriver(source: DriverSource, defaultDir: string = DEFAULT_DIR): Promise<QueueDriver> {
  if (source.driver) return source.driver;
  if (source.storage) return resolveStorageDriver(source.storage, { env: source.env });
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
 * `durable-object:BINDING` takes the binding from `env`, the Worker's (see `storageNeedsEnv`).
 *
 * @example
 * const driver = await resolveStorageDriver(process.env.VQ_STORAGE ?? DEFAULT_DIR);
 * const queue = await openQueue("orders", { driver });
 */
export async function resolveStorageDriver(spec: string | QueueDriver, context: { env?: WorkerEnv } = {}): Promise<QueueDriver> {
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
      const [dir = "", query] = splitQuery(rest);
      if (!dir) throw specError(spec);
      return fsDriver({ dir, ...fsParams(text, query) });
    }
    case "file": {
      const [path = "", query] = splitQuery(text);
      return fsDriver({ dir: fileURLToPath(path), ...fsParams(text, query) });
    }
    case "memory": {
      return memoryDriver(rest ? { name: rest } : {});
    }
    case "redis":
    case "rediss": {
      const url = new URL(text);
      const base = url.searchParams.get("base") ?? "vq";
      const own = unstorageParams(text, url.searchParams);
      for (const name of ["base", "lease", "instances"]) url.searchParams.delete(name);
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      const redisDriver = (await importOptional("ioredis", () => import("unstorage/drivers/redis"))).default;
      // SCAN 1000 keys per round trip (the default, 10, makes listing a large keyspace slow).
      const storage = createStorage({ driver: redisDriver({ url: url.href, scanCount: 1000 }) });
      return unstorageBacked(storage, { ...own, base, key: `redis:${url.host}${url.pathname}` });
    }
    case "redis+vq":
    case "rediss+vq": {
      return redisBacked(text, scheme);
    }
    case "redis+vq+sentinel": {
      return sentinelBacked(text);
    }
    case "unstorage-fs": {
      const [dir = "", query] = splitQuery(rest);
      if (!dir) throw specError(spec);
      const params = new URLSearchParams(query);
      refuseUnknownParams(text, params, ["lease", "instances"]);
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      const unstorageFs = (await importOptional("unstorage", () => import("unstorage/drivers/fs"))).default;
      return unstorageBacked(createStorage({ driver: unstorageFs({ base: dir }) }), { ...unstorageParams(text, params), key: `unstorage-fs:${dir}` });
    }
    case "unstorage-memory": {
      const { createStorage } = await importOptional<typeof import("unstorage")>("unstorage", () => import("unstorage"));
      return unstorageBacked(createStorage(), {});
    }
    case "durable-object": {
      return durableObjectBacked(text, context.env);
    }
    default: {
      throw specError(spec);
    }
  }
}

/** Whether the spec names a binding of the Worker's env (`durable-object:`): it can be resolved only once that env is known. */
export function storageNeedsEnv(spec: string | undefined): boolean {
  return /^\s*durable-object:/i.test(spec ?? "");
}

// --- Internal helpers ---

/** `path?query` at the first `?` (a directory named with a `?` needs the plain-path form). */
function splitQuery(text: string): [string, string | undefined] {
  const at = text.indexOf("?");
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + 1)];
}

/** Throws on a query parameter of a storage spec not in `known`, saying which are (`hint`). */
function refuseUnknownParams(text: string, params: URLSearchParams, known: string[], hint = known.join(", ")): void {
  const unknown = [...params.keys()].filter((k) => !known.includes(k));
  if (unknown.length > 0)
    throw optionError(`Invalid storage ${showValue(text)}: unknown parameter ${unknown.map((k) => JSON.stringify(k)).join(", ")}; use ${hint}.`);
}

/** The fs driver's options in an `fs:` or `file:` spec's query: `lease` (ms). */
function fsParams(text: string, query: string | undefined): { lockLeaseMs?: number } {
  if (query === undefined) return {};
  const params = new URLSearchParams(query);
  refuseUnknownParams(text, params, ["lease"], "lease (ms: fs:./queues?lease=5000)");
  const lease = params.get("lease");
  if (lease === null) return {};
  if (!/^\d{1,9}$/.test(lease))
    throw optionError(`Invalid storage ${showValue(text)}: lease=${JSON.stringify(lease)} is not a whole number of ms (e.g. lease=5000).`);
  return { lockLeaseMs: Number(lease) };
}

/** `durable-object:BINDING[?prefix=&lease=&poll=]` (see `STORAGE_SPECS`): the durable-object driver on the env's binding. */
async function durableObjectBacked(text: string, env: WorkerEnv | undefined): Promise<QueueDriver> {
  const bad = (what: string) => optionError(`Invalid storage ${showValue(text)}: ${what}.`);
  const [name = "", query = ""] = text.slice("durable-object:".length).split("?", 2);
  if (!/^[A-Za-z_]\w*$/.test(name))
    throw bad(
      `${name ? `${JSON.stringify(name)} is not` : "it names no"} binding; use durable-object:BINDING, BINDING being the name of the VQueueObject class's binding in the wrangler config (e.g. durable-object:VQUEUE)`,
    );
  if (!inWorkerd())
    throw bad(
      "Durable Objects are reachable only from a Cloudflare Worker (workerd): build the Nitro app with the cloudflare-module preset, or use another storage here",
    );
  if (!env) throw bad("the Worker's env is not known here; pass it (resolveStorageDriver(spec, { env }))");
  const namespace = env[name] as Partial<DurableObjectNamespace> | undefined;
  if (typeof namespace?.idFromName !== "function" || typeof namespace.get !== "function") {
    const namespaces = Object.keys(env).filter((key) => typeof (env[key] as Partial<DurableObjectNamespace> | null)?.idFromName === "function");
    const found =
      namespace === undefined ? `the Worker has no binding ${JSON.stringify(name)}` : `the binding ${JSON.stringify(name)} is not a Durable Object namespace`;
    throw bad(
      `${found}. Bind the VQueueObject class as ${name} in the wrangler config ("durable_objects": { "bindings": [{ "name": "${name}", "class_name": "VQueueObject" }] }, and a migration that creates it); Durable Object namespaces bound now: ${namespaces.length > 0 ? namespaces.join(", ") : "none"}`,
    );
  }
  const params = new URLSearchParams(query);
  refuseUnknownParams(text, params, ["prefix", "lease", "poll"]);
  const number = (key: string) => (params.has(key) ? Number(params.get(key)) : undefined);
  const { default: durableObjectDriver } = await import("./drivers/durable-object");
  return durableObjectDriver({
    namespace: namespace as DurableObjectNamespace,
    prefix: params.get("prefix") ?? undefined,
    lockLeaseMs: number("lease"),
    pollIntervalMs: number("poll"),
    key: `${name}:${params.get("prefix") ?? "vq"}`,
  });
}

/** The unstorage driver's options in a `redis://` or `unstorage-fs:` spec's query: `lease` (ms), `instances` (one, many). */
function unstorageParams(text: string, params: URLSearchParams): Pick<UnstorageDriverOptions, "lockLeaseMs" | "instances"> {
  const lease = params.get("lease");
  const instances = params.get("instances");
  if (lease !== null && !/^\d{1,9}$/.test(lease))
    throw optionError(`Invalid storage ${showValue(text)}: lease=${JSON.stringify(lease)} is not a whole number of ms (e.g. lease=5000).`);
  if (instances !== null && instances !== "one" && instances !== "many")
    throw optionError(
      `Invalid storage ${showValue(text)}: instances=${JSON.stringify(instances)}; use instances=one (the default) or instances=many (several processes, unfenced).`,
    );
  return { ...(lease === null ? {} : { lockLeaseMs: Number(lease) }), ...(instances === null ? {} : { instances }) };
}

async function unstorageBacked(
  storage: import("unstorage").Storage,
  options: Pick<UnstorageDriverOptions, "base" | "key" | "lockLeaseMs" | "instances">,
): Promise<QueueDriver> {
  const { default: unstorageDriver } = await import("./drivers/unstorage");
  return unstorageDriver({ storage, disposeStorage: true, ...options });
}

/** `redis+vq://...` (see `STORAGE_SPECS`): v-queue's redis driver on a client made from the URL. */
async function redisBacked(text: string, scheme: string): Promise<QueueDriver> {
  const url = new URL(text);
  const params = url.searchParams;
  const cluster = params.get("cluster");
  if (cluster !== null && cluster !== "1" && cluster !== "0")
    throw optionError(`Invalid storage ${showValue(text)}: cluster=${cluster}; use cluster=1 (a Redis Cluster) or leave it out.`);
  const options = { ...driverParams(text, params, ["cluster"]), key: `${cluster === "1" ? "cluster" : "redis"}:${url.host}${url.pathname}` };
  const redisUrl = `${scheme === "rediss+vq" ? "rediss" : "redis"}://${url.username ? `${url.username}${url.password ? `:${url.password}` : ""}@` : ""}${url.host}${url.pathname}`;
  const { default: Redis, Cluster } = await importOptional<typeof import("ioredis")>("ioredis", () => import("ioredis"), "ioredis");
  const client =
    cluster === "1"
      ? new Cluster([{ host: url.hostname, port: Number(url.port || 6379) }], {
          redisOptions: { username: url.username || undefined, password: url.password || undefined, tls: scheme === "rediss+vq" ? {} : undefined },
        })
      : new Redis(redisUrl, { lazyConnect: true });
  return redisDriverOn(client, options);
}

/**
 * `redis+vq+sentinel://[user:pass@]h1:p1,h2:p2/db?name=m&...` (see `STORAGE_SPECS`): the
 * redis driver on an ioredis client that asks the sentinels for master `name` (and again after
 * a failover). WHATWG URLs take one host, so the authority is split here.
 */
async function sentinelBacked(text: string): Promise<QueueDriver> {
  const bad = (what: string) =>
    optionError(
      `Invalid storage ${showValue(text)}: ${what}. Use redis+vq+sentinel://[user:pass@]host:port,host:port,.../db?name=mymaster (the hosts are sentinels; port 26379 if left out).`,
    );
  const match = /^redis\+vq\+sentinel:\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(text);
  if (!match) throw bad("not a URL of that form");
  const [, auth, hostList = "", path = "", query = ""] = match;
  const sentinels = hostList.split(",").map((entry) => {
    const hostPort = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/i.exec(entry);
    const port = Number(hostPort?.[2] ?? 26379);
    if (!hostPort || port < 1 || port > 65_535) throw bad(`sentinel ${JSON.stringify(entry)} is not host or host:port`);
    return { host: hostPort[1]!.replace(/^\[(.*)\]$/, "$1"), port };
  });
  const db = path === "" || path === "/" ? 0 : /^\/\d{1,5}$/.test(path) ? Number(path.slice(1)) : Number.NaN;
  if (!Number.isInteger(db)) throw bad(`the database ${JSON.stringify(path.slice(1))} is not a number`);
  const params = new URLSearchParams(query);
  const name = params.get("name");
  if (!name || /\s/.test(name)) throw bad(name ? `name=${JSON.stringify(name)} has white space` : "the master's name is missing (?name=)");
  const colon = auth ? auth.indexOf(":") : -1;
  const [username, password] = auth ? (colon < 0 ? [auth, ""] : [auth.slice(0, colon), auth.slice(colon + 1)]).map(decodeURIComponent) : [];
  const options = {
    ...driverParams(text, params, ["name"]),
    key: `sentinel:${name}@${sentinels
      .map((s) => `${s.host}:${s.port}`)
      .sort()
      .join(",")}/${db}`,
  };
  const { default: Redis } = await importOptional<typeof import("ioredis")>("ioredis", () => import("ioredis"), "ioredis");
  return redisDriverOn(new Redis({ sentinels, name, db, username: username || undefined, password: password || undefined, lazyConnect: true }), options);
}

/** The redis driver's options that every `redis+vq` URL form takes as query parameters (`extra`: the form's own, checked by it). */
function driverParams(text: string, params: URLSearchParams, extra: string[]) {
  refuseUnknownParams(text, params, ["prefix", ...extra, "lease", "replicas", "waitMs"]);
  const number = (name: string) => (params.has(name) ? Number(params.get(name)) : undefined);
  const replicas = number("replicas");
  return {
    prefix: params.get("prefix") ?? undefined,
    lockLeaseMs: number("lease"),
    waitReplicas: replicas === undefined ? undefined : { replicas, timeoutMs: number("waitMs") },
  };
}

/** The redis driver on a client made for it (closed by its `dispose()`, or now if the options are refused). */
async function redisDriverOn(
  client: import("ioredis").Redis | import("ioredis").Cluster,
  options: Omit<import("./drivers/redis").RedisDriverOptions, "redis">,
): Promise<QueueDriver> {
  const { default: redisDriver } = await import("./drivers/redis");
  try {
    return redisDriver({ redis: client, disposeClient: true, ...options });
  } catch (error) {
    client.disconnect();
    throw error;
  }
}

async function importOptional<T>(name: string, load: () => Promise<T>, install = name === "ioredis" ? "unstorage ioredis" : "unstorage"): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException)?.code === "ERR_MODULE_NOT_FOUND" || /Cannot find (module|package)/.test(String(error));
    if (!missing) throw error;
    throw optionError(`Cannot import \`${name}\`. Install it (npm i ${install}) to use this storage.`, { cause: error });
  }
}

function specError(spec: unknown): VQueueError {
  return optionError(`Invalid storage ${showValue(spec)}: use one of\n  ${STORAGE_SPECS.join("\n  ")}`);
}
