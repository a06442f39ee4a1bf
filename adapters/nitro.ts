// Over 300 lines: the module (build-time hooks and generated code) and the runtime instance share the options and their checks.
/**
 * `v-queue/nitro`: mounts the v-queue HTTP API in a Nitro app, both generations:
 * Nitro v3 (`nitro` 3.x, h3 v2) and nitropack 2 (h3 v1, used by Nuxt 4).
 *
 * ```ts
 * // nitro.config.ts
 * import vQueue from "v-queue/nitro";
 * export default defineNitroConfig({ modules: [vQueue({ prefix: "/_queue" })] });
 * ```
 *
 * The module writes two virtual modules per instance: a plugin that opens the queues once per
 * server process (and closes them on shutdown), and a route handler for `<prefix>` and `<prefix>/**`. Both
 * import this file by package name, so the host's bundler resolves it from the app and both
 * share the one instance. Server code of the app reaches that instance with `useVQueue()`.
 */
import type { MessageInput } from "../src/format/message";
import type { ProduceOptions, ProduceResult } from "../src/writer/produce";
import type { ProduceResponse } from "../protocol/api";
import type { Schedule, ScheduleInput } from "../src/writer/schedules";
import { createQueueHandler, type AuthOptions, type QueueAppOptions, type QueueHandler } from "../runtime/index";
import { optionError, throwProblems } from "../src/core/check";
import { LOG_PREFIX, VQueueError } from "../src/core/errors";
import { jsonError } from "../runtime/errors";
import { moduleOptionProblems } from "./config-schema";
import { NITRO_DEFAULT_DIR, resolveDriver, storageNeedsEnv } from "./storage";
import { exportQueueObject, workerEnv, workerEnvPending, type NitroEntryOptions } from "./nitro-cloudflare";
import { engineWorker, sharedHandle, withHttpStatus, type VQueueSharedConsumer } from "./nitro-shared";
import type { LeasedClientMessage } from "../client/shared";
import type { Worker, WorkerHandlerContext, WorkerOptions } from "../client/worker";

export type { VQueueSharedConsumer } from "./nitro-shared";

/** Options of the module: plain JSON (they are written into the build and the runtime config). */
export interface VQueueNitroOptions extends Pick<
  QueueAppOptions,
  | "durability"
  | "compression"
  | "start"
  | "syncCommits"
  | "consumerIdleMs"
  | "limits"
  | "retention"
  | "queues"
  | "shared"
  | "idempotencyWindowMs"
  | "maxDelayed"
  | "dashboard"
  | "monitor"
> {
  /**
   * Schedules set (created, or updated in place) when the instance opens, by name: each with its
   * (ordinary) queue, exactly one of `cron` (in `tz`, UTC by default) and `everyMs`, and the
   * `message` each firing produces (default `{ schedule, tick, at }`). Fired exactly once per tick
   * by whichever server process holds the queue's writer; a schedule left out later stays (remove
   * it with `useVQueue().unschedule`). Next to Nitro's own scheduled tasks: these produce messages.
   */
  schedules?: Record<string, ScheduleInput & { queue: string }>;
  /** `<prefix>/metrics` (Prometheus): `true` behind auth, `{ open: true }` without, `false` no route. @default true */
  metrics?: boolean | { open?: boolean };
  /** Name of this instance, for `useVQueue(name)` and the runtime config key. @default "default" */
  name?: string;
  /** Where the API is mounted: `<prefix>/health`, `<prefix>/api/v1/...`. @default "/_queue" */
  prefix?: string;
  /** Data directory of the fs driver, relative to the server's working directory; at run time `NITRO_V_QUEUE_DEFAULT_DIR` (`NUXT_V_QUEUE_DEFAULT_DIR` in Nuxt). @default ".data/v-queue" */
  dir?: string;
  /** A storage spec instead of `dir`: `memory:`, `redis://host:6379/0`, `unstorage-fs:./dir`, `durable-object:VQUEUE` (Cloudflare), ... (see `resolveStorageDriver`). */
  storage?: string;
  /**
   * Basic auth users; prefer setting them at run time (`NITRO_V_QUEUE_DEFAULT_AUTH_USERS='[...]'`).
   * Without users the HTTP API, the dashboard and the metrics are not served (`useVQueue()` needs
   * none of them). `false` serves them without auth: dangerous, anyone who reaches the app can
   * read, change and delete queues (a warning says so at start).
   */
  auth?: AuthOptions | false;
}

/** The resolved options of one instance, as stored in `runtimeConfig.vQueue[name]`. */
export interface VQueueRuntimeOptions extends Omit<VQueueNitroOptions, "name"> {
  prefix: string;
  dir: string;
  storage: string;
}

/** The part of a Nitro instance (either generation) the module touches. */
export interface NitroLike {
  meta?: { majorVersion?: number };
  options: NitroEntryOptions & {
    handlers: { route: string; handler: string; lazy?: boolean }[];
    plugins: string[];
    virtual?: Record<string, string | (() => string | Promise<string>)>;
    runtimeConfig: Record<string, unknown>;
    imports?: false | { presets?: unknown[] };
  };
}

export interface NitroModuleLike {
  name: string;
  setup(nitro: NitroLike): void;
}

/** The Nitro module. `options` are the build-time defaults; the runtime config (env) overrides them. */
export default function vQueue(options: VQueueNitroOptions = {}): NitroModuleLike {
  const { name = "default", ...rest } = options;
  if (!/^[\w-]+$/.test(name)) throw optionError(`Invalid name ${JSON.stringify(name)}: letters, digits, '_' and '-' only.`);
  const prefix = normalizePrefix(rest.prefix ?? "/_queue");
  if (!prefix)
    throw optionError(`Invalid prefix ${JSON.stringify(rest.prefix)}: give a path such as "/_queue" (an empty one would take every route of the app).`);
  // The build-time values (unknown keys too); the runtime config's are checked when the instance opens.
  throwProblems(moduleOptionProblems(options));
  return {
    name: "v-queue",
    setup(nitro) {
      const isNitro3 = (nitro.meta?.majorVersion ?? 3) >= 3;
      const runtimeConfig = nitro.options.runtimeConfig;
      const all = ((runtimeConfig.vQueue as Record<string, VQueueRuntimeOptions> | undefined) ??= {});
      // Every key present (even empty), so that env variables can override it at run time.
      all[name] = { dir: NITRO_DEFAULT_DIR, storage: "", auth: { users: [] }, limits: {}, ...all[name], ...JSON.parse(JSON.stringify(rest)), prefix };

      const id = `#v-queue/${name}`;
      const virtual = (nitro.options.virtual ??= {});
      virtual[`${id}/plugin`] = () => pluginCode(name);
      virtual[`${id}/handler`] = () => (isNitro3 ? nitro3HandlerCode(name) : nitro2HandlerCode(name));
      nitro.options.plugins.push(`${id}/plugin`);
      // The prefix itself too: the dashboard is `<prefix>/` (`<prefix>` redirects there), which `/**` alone leaves to the app's pages.
      nitro.options.handlers.push({ route: prefix, handler: `${id}/handler` }, { route: `${prefix}/**`, handler: `${id}/handler` });
      // Cloudflare Worker presets: the Durable Object class for a `durable-object:` storage.
      exportQueueObject(nitro.options);
      // nitropack 2 (and Nuxt) auto-import `useVQueue` in server code.
      if (nitro.options.imports) (nitro.options.imports.presets ??= []).push({ from: "v-queue/nitro", imports: ["useVQueue"], typeFrom: ownTypesPath() });
    },
  };
}

export { vQueue };

/**
 * Where the generated `nitro-imports.d.ts` reads `useVQueue`'s type from: this built file's path,
 * which Nitro writes relative and without its extension (`dist/nitro`, answered by the
 * `dist/nitro.d.ts` the build writes). Left to itself Nitro writes `node_modules/v-queue/nitro`
 * (no such file) or, for a linked package, `dist/nitro` too: either way `useVQueue` was `any`.
 * Run from the sources (tests), no built file: the package name.
 */
function ownTypesPath(): string | undefined {
  const url = new URL("nitro.mjs", import.meta.url);
  if (url.protocol !== "file:" || !import.meta.url.endsWith("/nitro.mjs")) return undefined;
  return decodeURIComponent(url.pathname).replace(/^\/([A-Za-z]:)/, "$1");
}

// --- Generated code (imports by package name: resolved from the app, one shared instance) ---

// The app's own plugins run before this one (Nitro puts them first): registered when the plugin
// module loads (before any plugin runs), the instance opens at its first `useVQueue()`.
function pluginCode(name: string): string {
  const key = JSON.stringify(name);
  return [
    `import { defineNitroPlugin, useRuntimeConfig } from "nitro/runtime";`,
    `import { registerVQueue, useVQueue } from "v-queue/nitro";`,
    `registerVQueue(${key}, () => {`,
    `  const config = useRuntimeConfig();`,
    `  return { options: config.vQueue?.[${key}] ?? {}, baseURL: config.app?.baseURL };`,
    `});`,
    `export default defineNitroPlugin((nitroApp) => {`,
    `  const instance = useVQueue(${key});`,
    `  nitroApp.hooks.hook("close", () => instance.close());`,
    `});`,
  ].join("\n");
}

// Nitro v3: h3 v2 takes a `{ fetch }` object; only the web Request crosses (Nitro's h3 is not ours).
function nitro3HandlerCode(name: string): string {
  return [
    `import { disconnectSignal, vQueueFetch } from "v-queue/nitro";`,
    `export default { fetch: (request) => vQueueFetch(${JSON.stringify(name)}, request, disconnectSignal(request)) };`,
  ].join("\n");
}

/**
 * The client going away, for Nitro v3 on Node: the response's `close` before it finished. Not
 * `request.signal`: srvx 0.8 (Nitro 3.0.0) aborts it on the request's `close`, which Node emits
 * once the body is read, so every POST with a body looked abandoned (a lease nacked what it
 * took and answered none). Elsewhere (no Node response): undefined, the request's own signal.
 */
export function disconnectSignal(request: Request): AbortSignal | undefined {
  const res = (request as { runtime?: { node?: { res?: NodeResponseLike } } }).runtime?.node?.res;
  if (!res || typeof res.once !== "function") return undefined;
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** What `disconnectSignal` needs of a Node `ServerResponse` (no Node types in the generated code's path). */
interface NodeResponseLike {
  readonly writableFinished: boolean;
  once(event: "close", listener: () => void): unknown;
}

// nitropack 2: "h3" here is the host's h3 v1. Its web request has no disconnect signal: the
// response's `close` before it finished is the client going away.
function nitro2HandlerCode(name: string): string {
  return [
    `import { defineEventHandler, toWebRequest } from "h3";`,
    `import { vQueueFetch } from "v-queue/nitro";`,
    `export default defineEventHandler((event) => {`,
    `  const res = event.node.res;`,
    `  const controller = new AbortController();`,
    `  res.once("close", () => { if (!res.writableFinished) controller.abort(); });`,
    `  return vQueueFetch(${JSON.stringify(name)}, toWebRequest(event), controller.signal);`,
    `});`,
  ].join("\n");
}

// --- Runtime: one instance per name and server process ---

/** What `push` answers: the body of the API's produce response (202's for a delayed push). */
export type VQueuePushResult = ProduceResponse;
/** `push` with a delay or a key (see the engine's `produce`): `replayed` when the key was accepted before; `partition` on a partitioned queue. */
export type VQueueProduceResult = ProduceResult & { partition?: number };

/** One mounted v-queue: the HTTP handler and its open queues. */
export interface VQueueInstance {
  readonly name: string;
  readonly prefix: string;
  /** The API's handler (routes without the prefix), created once with the driver: at start, or at first use for a Worker's `durable-object:` storage. */
  readonly handler: Promise<QueueHandler>;
  /**
   * A request to the API inside the process (no socket). Auth applies as for any request:
   * send an `authorization` header when it is on. `input` is a path of the API without the
   * prefix, e.g. `/api/v1/queues`.
   */
  fetch(input: string, init?: RequestInit): Promise<Response>;
  /** Pushes messages to `queue` (created if missing) through the same open writer as the API. */
  push(queue: string, messages: MessageInput | MessageInput[]): Promise<VQueuePushResult>;
  /**
   * Shared consumer `consumer` of `queue` (created on first use), the same one HTTP clients
   * lease from: poll, ack, nack, extend in this process. Its settings are the module's `shared`
   * (and `queues.{queue}.shared`).
   */
  shared(queue: string, consumer: string): VQueueSharedConsumer;
  /**
   * Runs `handler` on the messages of shared consumer `consumer`, `concurrency` at once, in this
   * process: the client's `worker` (same options, same messages, same `ctx`: its return value is
   * the result, `ctx.progress`) on the engine instead of HTTP.
   */
  worker<T = never>(
    queue: string,
    consumer: string,
    handler: (message: LeasedClientMessage<T>, ctx: WorkerHandlerContext) => unknown,
    options?: WorkerOptions,
  ): Worker;
  /** Pushes with a delay (`delayMs`, `at`) and/or an idempotency key (`key`), as the API's produce; to a partitioned queue with `partitionKey` (the only way: `push` refuses one). */
  produce(queue: string, messages: MessageInput | MessageInput[], options: ProduceOptions & { partitionKey?: string }): Promise<VQueueProduceResult>;
  /** Sets schedule `name` of `queue` (created, or updated in place): see the module's `schedules`. */
  schedule(queue: string, name: string, schedule: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }>;
  /** Removes schedule `name` of `queue`: false when there was none. */
  unschedule(queue: string, name: string): Promise<boolean>;
  /** The schedules of `queue`, with their last and next firing. */
  schedules(queue: string): Promise<Schedule[]>;
  /** Ends long polls, lets writes in flight finish, closes every queue. */
  close(): Promise<void>;
}

const REGISTRY = Symbol.for("v-queue.nitro.instances");
type Registry = Map<string, VQueueInstance>;
const registry = (): Registry => ((globalThis as { [REGISTRY]?: Registry })[REGISTRY] ??= new Map());

/** How the module's plugin opens an instance: its runtime config, read at first use. */
type Setup = () => { options: Partial<VQueueRuntimeOptions>; baseURL?: string };
const SETUPS = Symbol.for("v-queue.nitro.setups");
const setups = (): Map<string, Setup> => ((globalThis as { [SETUPS]?: Map<string, Setup> })[SETUPS] ??= new Map());

/** Says how instance `name` opens, at its first `useVQueue(name)`. Used by the generated plugin, when its module loads. */
export function registerVQueue(name: string, setup: Setup): void {
  setups().set(name, setup);
}

/** The instance `name` of this server process, opened at its first use (in any plugin, route or task). */
export function useVQueue(name = "default"): VQueueInstance {
  const instance = registry().get(name);
  if (instance) return instance;
  const setup = setups().get(name);
  if (!setup)
    throw optionError(`No v-queue named "${name}" in this server: add \`vQueue(${name === "default" ? "" : `{ name: "${name}" }`})\` to the Nitro modules.`);
  // Once: a closed instance (the server stopping) is not opened again.
  setups().delete(name);
  const { options, baseURL } = setup();
  return setupVQueue(name, options, baseURL);
}

/** Opens instance `name` (once per process; later calls return the same one). Used by the generated plugin. */
export function setupVQueue(name: string, options: Partial<VQueueRuntimeOptions>, baseURL = "/"): VQueueInstance {
  const existing = registry().get(name);
  if (existing) return existing;
  const resolved = normalizeRuntimeOptions(options);
  // The runtime config's values (env variables included), as the module's were at build.
  throwProblems(moduleOptionProblems(resolved));
  const instance = createInstance(name, resolved, baseURL);
  registry().set(name, instance);
  return instance;
}

/** Hands a request for `<prefix>/...` to instance `name`. Used by the generated handlers. */
export async function vQueueFetch(name: string, request: Request, signal?: AbortSignal): Promise<Response> {
  const instance = useVQueue(name) as VQueueInstance & { route(request: Request, signal?: AbortSignal): Promise<Response> };
  return instance.route(request, signal);
}

function createInstance(name: string, options: VQueueRuntimeOptions, baseURL: string): VQueueInstance {
  const { prefix, dir, storage, auth, schedules = {}, ...appOptions } = options;
  const prefixes = [normalizePrefix(baseURL) + prefix, prefix].filter((p, i, all) => all.indexOf(p) === i);
  const served = announceAccess(name, prefix, auth);
  const open = async () => {
    // A Worker's bindings are known from its first event on: `durable-object:` storage opens then (see `handler` below).
    const env = storageNeedsEnv(storage) ? await workerEnv() : undefined;
    const driver = await resolveDriver({ storage, dir, env }, NITRO_DEFAULT_DIR);
    // The Node process series when the host has node:fs (Nitro's Node presets); none elsewhere.
    const metrics = await import("./process-stats").then(
      ({ withProcessStats }) => withProcessStats(appOptions.metrics),
      () => appOptions.metrics,
    );
    const created = createQueueHandler({ ...appOptions, metrics, driver, auth });
    // The partitioned queues of `queues`, declared before the first request (a conflict stops this instance).
    await created.ready().catch(async (error: unknown) => {
      await created.close();
      throw error;
    });
    // The module's schedules, as configured now (each through its queue's writer, wherever it is held).
    for (const [schedule, { queue, ...timing }] of Object.entries(schedules)) {
      await created.schedule(queue, schedule, timing).catch((error: unknown) => {
        console.error(`${LOG_PREFIX} [nitro] "${name}": cannot set schedule "${schedule}" of "${queue}":`, error);
      });
    }
    return created;
  };
  let opened: Promise<QueueHandler> | undefined;
  const handler = () => {
    if (opened) return opened;
    if (storageNeedsEnv(storage) && workerEnvPending()) {
      return Promise.reject(
        optionError(
          `v-queue "${name}" opens its queues (storage ${JSON.stringify(storage)}) at the Worker's first event, where its bindings are known: use it while serving a request (or another event), not at global scope.`,
        ),
      );
    }
    const opening = (opened = open());
    opening.catch((error: unknown) => {
      console.error(`${LOG_PREFIX} [nitro] Cannot open "${name}":`, error);
      // The storage failed (unreachable at start, a Redis failing over) or a lock was held a
      // moment too long (another instance declaring the queues): the next use tries again,
      // instead of every request failing for the app's life. A bad config stays failed.
      if (VQueueError.isError(error) && (error.code === "E_IO" || error.code === "E_LOCKED") && opened === opening) opened = undefined;
    });
    return opening;
  };
  // At start, unless the storage is a binding of the Worker's env: Nitro makes the app at the
  // Worker's global scope, before any event gives the env (and workerd allows no I/O there).
  if (!storageNeedsEnv(storage)) handler();

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      if (registry().get(name) === instance) registry().delete(name);
      await (await opened?.catch(() => undefined))?.close();
    })());
  // On SIGTERM/SIGINT, end long polls at once: Nitro's graceful shutdown first waits for open
  // requests (up to 30 s), then calls the `close` hook. With nobody else listening (shutdown
  // handling disabled), the signal is raised again once the queues are closed.
  const onSignal = (signal: NodeJS.Signals) => {
    void close().finally(() => {
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  };
  process.once("SIGTERM", onSignal);
  process.once("SIGINT", onSignal);

  const instance = {
    name,
    prefix,
    get handler() {
      return handler();
    },
    async fetch(input: string, init: RequestInit = {}) {
      return (await handler()).fetch(new Request(new URL(input, "http://v-queue.internal"), init));
    },
    async push(queue: string, messages: MessageInput | MessageInput[]) {
      // Straight to the engine, through the same open writer as the API: no HTTP, no auth.
      const positions = await withHttpStatus((await handler()).push(queue, messages));
      return { queue, count: positions.length, first: positions[0]!, last: positions.at(-1)! };
    },
    shared: (queue: string, consumer: string) => sharedHandle(handler, queue, consumer),
    worker: <T>(queue: string, consumer: string, run: (message: LeasedClientMessage<T>, ctx: WorkerHandlerContext) => unknown, workerOptions?: WorkerOptions) =>
      engineWorker(handler, queue, consumer, run, workerOptions),
    async produce(queue: string, messages: MessageInput | MessageInput[], produceOptions: ProduceOptions & { partitionKey?: string }) {
      return withHttpStatus((await handler()).produce(queue, messages, produceOptions));
    },
    schedule: async (queue: string, schedule: string, input: ScheduleInput) => withHttpStatus((await handler()).schedule(queue, schedule, input)),
    unschedule: async (queue: string, schedule: string) => withHttpStatus((await handler()).unschedule(queue, schedule)),
    schedules: async (queue: string) => withHttpStatus((await handler()).schedules(queue)),
    async route(request: Request, signal?: AbortSignal) {
      // Not served (no users, and auth not turned off): as if not mounted.
      if (!served) return jsonError(404, "E_ROUTE", "Not found: the v-queue HTTP API is not served (no users configured; see the server's log at start).");
      const url = new URL(request.url);
      const base = prefixes.find((p) => url.pathname === p || url.pathname.startsWith(`${p}/`));
      // The dashboard's relative links need the trailing slash: `<prefix>` -> `<prefix>/`.
      if (base && url.pathname === base && options.dashboard !== false && (request.method === "GET" || request.method === "HEAD")) {
        return new Response(null, { status: 308, headers: { location: `${base}/${url.search}` } });
      }
      url.pathname = base ? url.pathname.slice(base.length) || "/" : url.pathname;
      const hasBody = request.method !== "GET" && request.method !== "HEAD";
      const inner = new Request(url, {
        method: request.method,
        headers: request.headers,
        body: hasBody ? request.body : undefined,
        signal: signal ?? request.signal,
        duplex: "half",
      } as RequestInit);
      return (await handler()).fetch(inner);
    },
    close,
  };
  return instance;
}

// --- Internal helpers ---

/**
 * Whether the HTTP API (dashboard and metrics too) is served, said once at start: with users
 * (auth on), or with auth turned off on purpose (`auth: false` or `enabled: false`, warned).
 * Without users it is not: nothing that reads or changes queues is open on the app's port by accident.
 */
function announceAccess(name: string, prefix: string, auth: AuthOptions | false | undefined): boolean {
  const env = `V_QUEUE_${name.toUpperCase().replace(/-/g, "_")}_AUTH`;
  if (auth === false || auth?.enabled === false) {
    console.warn(
      `${LOG_PREFIX} [nitro] "${name}": the HTTP API, dashboard and metrics at ${prefix} are served WITHOUT auth (auth: false): anyone who reaches this app can read, change and delete queues. Give users instead (NITRO_${env}_USERS, NUXT_${env}_USERS in Nuxt).`,
    );
    return true;
  }
  if ((auth?.users?.length ?? 0) > 0) return true;
  console.info(
    `${LOG_PREFIX} [nitro] "${name}": the HTTP API, dashboard and metrics at ${prefix} are not served: no users configured (useVQueue() in server code needs none). Give users to serve them (NITRO_${env}_USERS='[{"username":"admin","password":"..."}]', NUXT_${env}_USERS in Nuxt).`,
  );
  return false;
}

function normalizePrefix(prefix: string): string {
  return `/${prefix}`.replace(/\/{2,}/g, "/").replace(/\/+$/, "");
}

/**
 * Runtime config values can come from env variables: Nitro v3 passes them as raw strings,
 * nitropack 2 parses them. Parse the JSON-shaped ones here so both behave the same.
 */
function normalizeRuntimeOptions(options: Partial<VQueueRuntimeOptions>): VQueueRuntimeOptions {
  const parse = (value: unknown) => {
    if (typeof value !== "string" || !/^\s*([[{]|true$|false$|-?\d)/.test(value)) return value;
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  };
  // A deep copy: nitropack 2's runtime config is read-only.
  const copy = JSON.parse(JSON.stringify(options)) as Partial<VQueueRuntimeOptions>;
  const o = Object.fromEntries(
    Object.entries(copy).map(([k, v]) => [k, ["dir", "storage", "prefix", "durability", "compression", "start"].includes(k) ? v : parse(v)]),
  );
  const auth = o.auth as AuthOptions | false | undefined;
  if (auth) {
    auth.users = parse(auth.users) as AuthOptions["users"];
    auth.enabled = parse(auth.enabled) as boolean | undefined;
  }
  const parseEach = (values: unknown) => {
    if (values && typeof values === "object") for (const [key, value] of Object.entries(values)) (values as Record<string, unknown>)[key] = parse(value);
  };
  parseEach(o.limits);
  parseEach(o.retention);
  parseEach(o.shared);
  for (const settings of Object.values((o.queues ?? {}) as Record<string, { retention?: unknown; shared?: unknown; partitions?: unknown }>)) {
    parseEach(settings?.retention);
    parseEach(settings?.shared);
    if (settings?.partitions !== undefined) settings.partitions = parse(settings.partitions);
  }
  return { ...o, prefix: normalizePrefix(String(o.prefix ?? "/_queue")), dir: String(o.dir ?? ""), storage: String(o.storage ?? "") } as VQueueRuntimeOptions;
}
