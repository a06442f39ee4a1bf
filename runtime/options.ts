// Over 300 lines: the server's options in one place, as the brief asks: their types with docs,
// the defaults, and the checks that say what was wrong (one resolver, so nothing defaults twice).
import { defu } from "defu";
import { resolveCors, type CorsOptions } from "./cors";
import { boolean, integer, showValue, throwProblems } from "../src/core/check";
import type { QueueDriver } from "../src/core/driver";
import { LOG_PREFIX, type QueueProblem } from "../src/core/errors";
import {
  CONSUMER_DEFAULTS,
  QUEUE_DEFAULTS,
  checkCompression,
  checkIdempotencyWindow,
  checkMaxDelayed,
  checkDictionaryOption,
  checkDriver,
  checkDurability,
  checkStart,
  checkZstd,
  type Compression,
  type Durability,
  type StartPosition,
} from "../src/options/queue";
import type { ZstdLoader } from "../src/compression/zstd";
import { retentionProblems, type RetentionOptions } from "../src/options/retention";
import { isValidQueueName } from "../src/core/names";
import { MAX_PARTITIONS, partitionName } from "../src/partitions/declaration";
import { sharedSettingsProblems, type SharedSettings } from "../src/options/shared";
import type { AuthUser, ProcessStats, QueueAppLogger, ResolvedAuth } from "./types";
import pkg from "../package.json" with { type: "json" };

export interface AuthOptions {
  /** @default true when `users` is not empty */
  enabled?: boolean;
  /** @default "v-queue" */
  realm?: string;
  users?: AuthUser[];
}

/** Limits on what a request may ask for. Every one is checked and answered with a 4xx when broken. */
export interface QueueAppLimits {
  /** Largest request body, in bytes (413 beyond). @default 16777216 (16 MiB) */
  maxBodyBytes: number;
  /** Largest `max_messages`. @default 10000 */
  maxMessages: number;
  /** `max_messages` when not given, as the Rust server. @default 1 */
  defaultMessages: number;
  /** Largest `timeout_ms` of a long poll; keep it well below Node's requestTimeout (300 s). @default 60000 */
  maxTimeoutMs: number;
  /** `timeout_ms` when not given: 0 answers at once, as the Rust server. @default 0 */
  defaultTimeoutMs: number;
  /** A consume response stops adding messages once their bodies reach this many bytes (at least one is sent). @default 8388608 (8 MiB) */
  maxResponseBytes: number;
  /** Most messages in one produce request. @default 100000 */
  maxBatchMessages: number;
}

export interface QueueAppOptions {
  /**
   * The storage (required): `fsDriver({ dir })`, `memoryDriver()`, ... The adapters (the server,
   * the CLI, Nitro) make it from their `dir` or `storage` option (see `resolveDriver`).
   */
  driver?: QueueDriver;
  /** When a produce request is answered (see the engine's `Durability`). @default "fsync" */
  durability?: Durability;
  /** How queues opened by produce requests write new parts (see the engine's `compression`). @default "none" */
  compression?: Compression;
  /** A zstd dictionary trained offline for every compressed part (see the engine's `compressionDictionary`). @default none */
  compressionDictionary?: Uint8Array;
  /** The zstd implementation of the queues and consumers (see the engine's `zstd`). @default the WebAssembly one; the server's and the CLI's: the native one when it loads */
  zstd?: ZstdLoader;
  /** How long a produce's `Idempotency-Key` is remembered (see the engine's `idempotencyWindowMs`). @default 300000 (5 minutes) */
  idempotencyWindowMs?: number;
  /** Most delayed messages pending per queue; a delayed produce past it is answered 507 `E_FULL` (see the engine's `maxDelayed`). @default 1000000 */
  maxDelayed?: number;
  /** Where a consumer created by its first consume starts. @default "earliest" */
  start?: StartPosition;
  /** fsync a consumer's position file on each commit. @default true */
  syncCommits?: boolean;
  /** Basic auth; `false` or no users: no auth. */
  auth?: AuthOptions | false;
  limits?: Partial<QueueAppLimits>;
  /**
   * A consumer nobody used for this long is closed (its lock and files released). Shorter
   * above half of `maxConsumers`: at the cap, a second. 0 keeps them open (until the cap
   * needs room). @default 300000
   */
  consumerIdleMs?: number;
  /**
   * Most consumers open at once. Consumers of a queue share its open files (the engine opens
   * each file once per process), so a consumer costs memory and a lock, and descriptors only
   * for a part no other reader of this process is on. Opening one more at the cap first closes
   * the least recently used idle one; when none is idle (long polls), the request is answered
   * 503 `E_BUSY` with `Retry-After`. Running out of descriptors anyway (EMFILE) closes idle
   * consumers at once and lowers the cap for a minute. 4096 lets a thousand long polls wait
   * at once (each on its own consumer), as the benchmark does.
   * @default 4096
   */
  maxConsumers?: number;
  /** CORS for pages on other origins (the client SDK in a browser). @default off */
  cors?: CorsOptions | false;
  /** Reported by `/health`. @default the package version */
  version?: string;
  /** Retention of every queue the server writes (see the engine's `RetentionOptions`), unless `queues` says otherwise. @default none */
  retention?: RetentionOptions;
  /**
   * Shared consumers the server opens (on their first lease): lease time, bounds, dead letters
   * (see the engine's `SharedConsumerOptions`), unless `queues` says otherwise. @default the engine's
   */
  shared?: SharedSettings;
  /**
   * Per-queue settings: `{ orders: { retention: { maxAgeMs: 86400000 } } }` replaces `retention`
   * for that queue (a queue named here without `retention` has none); `{ orders: { shared:
   * { maxDeliveries: 3 } } }` is laid over `shared`.
   */
  queues?: Record<string, QueueSettings>;
  /** Where faults (5xx) and recovery problems are logged, and requests with `logRequests`. @default console */
  logger?: QueueAppLogger;
  /** Log requests (see runtime/log.ts): 401/403 at warn, those that change state at info, the rest at debug. @default false */
  logRequests?: boolean;
  /** The dashboard page at `/` (and its files at `/_dashboard/`), behind the same auth as the API. @default true */
  dashboard?: boolean;
  /**
   * The monitor behind the dashboard, `/metrics` and `stat --watch` (runtime/monitor.ts): it
   * samples every queue while someone looks (a scrape, the page) and keeps their recent history.
   */
  monitor?: MonitorOptions;
  /**
   * `GET /metrics`, Prometheus text (docs/operating.md#metrics): `true` behind the API's auth (a user
   * sees the queues it may read), `{ open: true }` without auth (every queue), `false` no route.
   * @default true
   */
  metrics?: boolean | MetricsOptions;
}

export interface MonitorOptions {
  /** Time between samples (longer while a sample of many queues takes long). @default 1000 */
  sampleMs?: number;
  /** Samples kept per queue for the charts: 300 at 1 s are 5 minutes (per consumer: at most 60). @default 300 */
  historyPoints?: number;
  /** Sampling stops when nobody looked for this long (and resumes on the next look). @default 600000 */
  idleMs?: number;
  /**
   * The first look after a start waits this long at most for the first sample, then answers with
   * the queues read so far and names the others as pending (the sample goes on). @default 50
   */
  firstAnswerMs?: number;
}

export interface MetricsOptions {
  /** Serve `/metrics` without auth, every queue's series. @default false */
  open?: boolean;
  /** The host's `process_*` series, read at each scrape (the Node server and Nitro set it). @default none */
  process?: () => ProcessStats;
}

/** Settings of one queue (`queues.{name}`). */
export interface QueueSettings {
  retention?: RetentionOptions;
  shared?: SharedSettings;
  /**
   * Declares the queue partitioned with this many partitions (1 to 1024) when the app starts
   * (docs/partitioned.md): refused at start when it exists with another count or as an
   * ordinary queue. The count never changes.
   */
  partitions?: number;
}

export interface ResolvedQueueAppOptions {
  driver: QueueDriver;
  durability: Durability;
  compression: Compression;
  compressionDictionary: Uint8Array | undefined;
  zstd: ZstdLoader | undefined;
  idempotencyWindowMs: number;
  maxDelayed: number;
  start: StartPosition;
  syncCommits: boolean;
  auth: ResolvedAuth | undefined;
  limits: QueueAppLimits;
  consumerIdleMs: number;
  maxConsumers: number;
  cors: CorsOptions | undefined;
  version: string;
  logger: QueueAppLogger;
  logRequests: boolean;
  /** Undefined: no `/metrics` route (and no storage instrumentation). */
  metrics: { open: boolean; process?: () => ProcessStats } | undefined;
  dashboard: boolean;
  monitor: Required<MonitorOptions>;
  onProblem: (problem: QueueProblem) => void;
  /** The retention of a queue: its own (`queues`), else the default (`retention`). */
  retentionFor(queue: string): RetentionOptions | undefined;
  /** The shared-consumer settings of a queue: its own (`queues`) over the default (`shared`). */
  sharedFor(queue: string): SharedSettings;
  /** The queues `queues` declares partitioned, with their counts (declared when the app starts). */
  declaredPartitions: [queue: string, partitions: number][];
}

export const DEFAULT_LIMITS: QueueAppLimits = {
  maxBodyBytes: 16 * 1024 * 1024,
  maxMessages: 10_000,
  defaultMessages: 1,
  maxTimeoutMs: 60_000,
  defaultTimeoutMs: 0,
  maxResponseBytes: 8 * 1024 * 1024,
  maxBatchMessages: 100_000,
};

/**
 * The HTTP app's option schema: every option checked at once, before anything opens. A bad
 * one is a `VQueueError` `E_OPTION` saying what was wrong and what is allowed (all of them
 * when several are).
 */
export function resolveQueueAppOptions(options: QueueAppOptions = {}): ResolvedQueueAppOptions {
  const limits = defu(options.limits, inWorkerd() ? WORKERD_LIMITS : {}, DEFAULT_LIMITS) as QueueAppLimits;
  const resolved = {
    // The engine's defaults, from its one place (src/options/queue.ts).
    durability: options.durability ?? QUEUE_DEFAULTS.durability,
    compression: options.compression ?? QUEUE_DEFAULTS.compression,
    compressionDictionary: options.compressionDictionary,
    zstd: options.zstd,
    idempotencyWindowMs: options.idempotencyWindowMs ?? QUEUE_DEFAULTS.idempotencyWindowMs,
    maxDelayed: options.maxDelayed ?? QUEUE_DEFAULTS.maxDelayed,
    start: options.start ?? CONSUMER_DEFAULTS.start,
    syncCommits: options.syncCommits ?? CONSUMER_DEFAULTS.syncCommits,
    consumerIdleMs: options.consumerIdleMs ?? 300_000,
    maxConsumers: options.maxConsumers ?? 4096,
    dashboard: options.dashboard ?? true,
    monitor: defu(options.monitor, { sampleMs: 1000, historyPoints: 300, idleMs: 600_000, firstAnswerMs: 50 }),
  };
  throwProblems([
    checkDurability(resolved.durability, "durability"),
    checkCompression(resolved.compression, "compression"),
    checkDictionaryOption(resolved.compressionDictionary, resolved.compression),
    resolved.zstd === undefined ? undefined : checkZstd(resolved.zstd, "zstd"),
    checkStart(resolved.start, "start"),
    checkIdempotencyWindow(resolved.idempotencyWindowMs, "idempotencyWindowMs"),
    checkMaxDelayed(resolved.maxDelayed, "maxDelayed"),
    boolean(resolved.syncCommits, "syncCommits"),
    integer(0)(resolved.consumerIdleMs, "consumerIdleMs"),
    integer(1)(resolved.maxConsumers, "maxConsumers"),
    boolean(resolved.dashboard, "dashboard"),
    ...monitorProblems(options.monitor),
    ...limitsProblems(limits),
    ...authProblems(options.auth),
    checkDriver(options.driver, "driver"),
    ...retentionProblems(options.retention),
    ...sharedSettingsProblems(options.shared),
    ...queuesProblems(options.queues),
    ...metricsProblems(options.metrics),
  ]);
  const logger = options.logger ?? console;
  const metricsOptions: MetricsOptions = typeof options.metrics === "object" ? options.metrics : {};
  return {
    ...resolved,
    driver: options.driver!,
    auth: resolveAuth(options.auth),
    limits,
    cors: resolveCors(options.cors),
    version: options.version ?? pkg.version,
    logger,
    logRequests: options.logRequests ?? false,
    metrics: options.metrics === false ? undefined : { open: metricsOptions.open ?? false, process: metricsOptions.process },
    onProblem: (problem) => logger.warn(`${LOG_PREFIX} ${problem.code} in queue ${problem.queue}: ${problem.message}`),
    // Named in `queues`: its own retention, none when not given (`{ audit: {} }` turns the default off).
    retentionFor: (queue) => {
      const own = ownSettings(options.queues, queue);
      return own ? own.retention : options.retention;
    },
    sharedFor: (queue) => ({ ...options.shared, ...ownSettings(options.queues, queue)?.shared }),
    declaredPartitions: Object.entries(options.queues ?? {}).flatMap(([queue, settings]) =>
      settings.partitions === undefined ? [] : [[queue, settings.partitions] as [string, number]],
    ),
  };
}

/** What is wrong with per-queue settings at `path` (also the config schema's check). */
export function queuesProblems(queues: unknown, path = "queues"): string[] {
  if (queues === undefined) return [];
  if (typeof queues !== "object" || queues === null || Array.isArray(queues))
    return [`Invalid ${path} ${showValue(queues)}: expected an object of queue names, e.g. { "orders": { "retention": { "maxAgeMs": 86400000 } } }.`];
  return Object.entries(queues).flatMap(([name, settings]) => {
    if (!isValidQueueName(name)) return [`Invalid queue name ${showValue(name)} in ${path}.`];
    if (typeof settings !== "object" || settings === null || Array.isArray(settings))
      return [`Invalid ${path}.${name} ${showValue(settings)}: expected { "retention": { ... }, "shared": { ... }, "partitions": P }.`];
    const unknown = Object.keys(settings).filter((key) => key !== "retention" && key !== "shared" && key !== "partitions");
    const { retention, shared, partitions } = settings as { retention?: unknown; shared?: unknown; partitions?: unknown };
    return [
      ...unknown.map((key) => `Unknown key "${path}.${name}.${key}": use retention, shared or partitions.`),
      ...retentionProblems(retention, `${path}.${name}.retention`),
      ...sharedSettingsProblems(shared, `${path}.${name}.shared`),
      ...(partitions === undefined ? [] : [integer(1, MAX_PARTITIONS)(partitions, `${path}.${name}.partitions`)].filter((p) => p !== undefined)),
      ...(Number.isInteger(partitions) && !isValidQueueName(partitionName(name, (partitions as number) - 1))
        ? [`Invalid queue name ${showValue(name)} in ${path}: too long to be partitioned (its partitions are named "${name}.p<k>", at most 128 characters).`]
        : []),
    ];
  });
}

/** What is wrong with the `metrics` option at `path` (also the config schema's check). */
export function metricsProblems(metrics: unknown, path = "metrics"): string[] {
  if (metrics === undefined || typeof metrics === "boolean") return [];
  if (typeof metrics !== "object" || metrics === null || Array.isArray(metrics))
    return [`Invalid ${path} ${showValue(metrics)}: use true (behind auth), false (no /metrics route) or { "open": true } (no auth).`];
  const { open, process, ...rest } = metrics as Record<string, unknown>;
  return [
    ...Object.keys(rest).map((key) => `Unknown key "${path}.${key}": use open or process.`),
    open === undefined ? undefined : boolean(open, `${path}.open`),
    process === undefined || typeof process === "function"
      ? undefined
      : `Invalid ${path}.process ${showValue(process)}: a function returning the process stats.`,
  ].filter((p) => p !== undefined);
}

/** What is wrong with `monitor` at `path` (also the config schema's check). */
export function monitorProblems(monitor: unknown, path = "monitor"): string[] {
  if (monitor === undefined) return [];
  if (typeof monitor !== "object" || monitor === null || Array.isArray(monitor))
    return [`Invalid ${path} ${showValue(monitor)}: expected { sampleMs, historyPoints, idleMs, firstAnswerMs }.`];
  const { sampleMs, historyPoints, idleMs, firstAnswerMs, ...rest } = monitor as MonitorOptions;
  return [
    ...Object.keys(rest).map((key) => `Unknown key "${path}.${key}": use sampleMs, historyPoints, idleMs or firstAnswerMs.`),
    sampleMs === undefined ? undefined : integer(100, 3_600_000)(sampleMs, `${path}.sampleMs`),
    historyPoints === undefined ? undefined : integer(2, 100_000)(historyPoints, `${path}.historyPoints`),
    idleMs === undefined ? undefined : integer(0)(idleMs, `${path}.idleMs`),
    firstAnswerMs === undefined ? undefined : integer(0, 3_600_000)(firstAnswerMs, `${path}.firstAnswerMs`),
  ].filter((problem) => problem !== undefined);
}

/** A queue's own settings, if `queues` names it. */
function ownSettings(queues: Record<string, QueueSettings> | undefined, queue: string): QueueSettings | undefined {
  return queues && Object.hasOwn(queues, queue) ? queues[queue] : undefined;
}

/**
 * In workerd (Cloudflare Workers) a long poll waits at most 20 s unless `limits.maxTimeoutMs`
 * says otherwise: a waiting consumer looks for other isolates' writes once per driver poll
 * interval (1 s on the durable-object driver), and each look is a call that counts against the
 * request's subrequest budget (50 on the Free plan). docs/runtimes.md#cloudflare-workers.
 */
export const WORKERD_LIMITS: Partial<QueueAppLimits> = { maxTimeoutMs: 20_000 };

/** Whether this runs in workerd (its navigator says so). */
export function inWorkerd(): boolean {
  return (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent === "Cloudflare-Workers";
}

/** What is wrong with `limits` (over the defaults; undefined ones are not given), at `path`: also the config schema's check. */
export function limitsProblems(limits: object, path = "limits"): string[] {
  const given = Object.entries(limits).filter(([, value]) => value !== undefined);
  const problems = given.map(([key, value]) => integer(0)(value, `${path}.${key}`));
  const l = { ...DEFAULT_LIMITS, ...Object.fromEntries(given) } as QueueAppLimits;
  if (l.defaultMessages < 1 || l.defaultMessages > l.maxMessages)
    problems.push(`Invalid ${path}.defaultMessages ${showValue(l.defaultMessages)}: use 1..maxMessages (${showValue(l.maxMessages)}).`);
  if (l.defaultTimeoutMs > l.maxTimeoutMs)
    problems.push(`Invalid ${path}.defaultTimeoutMs ${showValue(l.defaultTimeoutMs)}: at most maxTimeoutMs (${showValue(l.maxTimeoutMs)}).`);
  return problems.filter((p) => p !== undefined);
}

function authProblems(auth: AuthOptions | false | undefined): (string | undefined)[] {
  const users = authUsers(auth);
  if (!users) return [];
  if (users.length === 0) return ["Invalid auth: enabled without users, nobody could log in."];
  return users.flatMap((user, i) => [
    typeof user?.username !== "string" || user.username.length === 0 || user.username.includes(":")
      ? `Invalid auth.users[${i}].username ${showValue(user?.username)}: a non-empty string without ':' (RFC 7617).`
      : undefined,
    typeof user?.password === "string" ? undefined : `Missing auth.users[${i}].password.`,
  ]);
}

function resolveAuth(auth: AuthOptions | false | undefined): ResolvedAuth | undefined {
  const users = authUsers(auth);
  return (
    users && {
      realm: (auth as AuthOptions).realm ?? "v-queue",
      users: users.map((user) => ({
        username: user.username,
        password: user.password,
        read: user.read ?? true,
        write: user.write ?? true,
        admin: user.admin ?? ((user.read ?? true) === true && (user.write ?? true) === true),
      })),
    }
  );
}

/** The users when auth is on (on by default once users are given), else undefined. */
function authUsers(auth: AuthOptions | false | undefined): AuthUser[] | undefined {
  if (!auth || auth.enabled === false) return undefined;
  const users = auth.users ?? [];
  return auth.enabled === undefined && users.length === 0 ? undefined : users;
}
