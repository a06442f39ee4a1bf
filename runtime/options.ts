import { defu } from "defu";
import { resolveCors, type CorsOptions } from "./cors";
import type { QueueAppLogger } from "./log";
import type { QueueDriver } from "../src/driver";
import type { QueueProblem } from "../src/errors";
import type { Durability, StartPosition } from "../src/options";
import pkg from "../package.json" with { type: "json" };

/** One user of the HTTP API (Basic auth, RFC 7617). */
export interface AuthUser {
  username: string;
  password: string;
  /**
   * May consume, commit, delete consumers and inspect: `true` for every queue, or a list of queue names.
   * @default true
   */
  read?: boolean | string[];
  /**
   * May produce (and so create queues): `true` for every queue, or a list of queue names.
   * @default true
   */
  write?: boolean | string[];
}

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
  /** The storage. Either this or `dir`. */
  driver?: QueueDriver;
  /** Data directory for the Node fs driver (loaded on first use; Node only). @default "./queues" when no driver */
  dir?: string;
  /** When a produce request is answered (see the engine's `Durability`). @default "fsync" */
  durability?: Durability;
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
   * Most consumers open at once; each holds a few file descriptors while open. Opening one
   * more at the cap first closes the least recently used idle one; when none is idle, the
   * request is answered 503 `E_BUSY` with `Retry-After`. Keep it well below the fd limit
   * (`ulimit -n`) divided by the files a consumer holds. Running out of descriptors anyway
   * (EMFILE) closes idle consumers at once and lowers the cap for a minute.
   * @default 256
   */
  maxConsumers?: number;
  /** CORS for pages on other origins (the client SDK in a browser). @default off */
  cors?: CorsOptions | false;
  /** Reported by `/health`. @default the package version */
  version?: string;
  /** Where faults (5xx) and recovery problems are logged, and requests with `logRequests`. @default console */
  logger?: QueueAppLogger;
  /** Log requests (see runtime/log.ts): 401/403 at warn, those that change state at info, the rest at debug. @default false */
  logRequests?: boolean;
}

export interface ResolvedAuth {
  realm: string;
  users: Required<AuthUser>[];
}

export interface ResolvedQueueAppOptions {
  driver?: QueueDriver;
  dir: string;
  durability: Durability;
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
  onProblem: (problem: QueueProblem) => void;
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

export function resolveQueueAppOptions(options: QueueAppOptions = {}): ResolvedQueueAppOptions {
  const limits = defu(options.limits, DEFAULT_LIMITS) as QueueAppLimits;
  for (const [key, value] of Object.entries(limits)) {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
      throw new TypeError(`[v-queue] [http] Invalid limit \`${key}\`: ${JSON.stringify(value)}, expected an integer >= 0.`);
    }
  }
  if (limits.defaultMessages < 1 || limits.defaultMessages > limits.maxMessages) {
    throw new TypeError("[v-queue] [http] `limits.defaultMessages` must be between 1 and `limits.maxMessages`.");
  }
  if (limits.defaultTimeoutMs > limits.maxTimeoutMs) {
    throw new TypeError("[v-queue] [http] `limits.defaultTimeoutMs` must not exceed `limits.maxTimeoutMs`.");
  }
  const consumerIdleMs = options.consumerIdleMs ?? 300_000;
  if (!Number.isInteger(consumerIdleMs) || consumerIdleMs < 0) {
    throw new TypeError(`[v-queue] [http] Invalid \`consumerIdleMs\`: ${JSON.stringify(consumerIdleMs)}, expected an integer >= 0.`);
  }
  const maxConsumers = options.maxConsumers ?? 256;
  if (!Number.isInteger(maxConsumers) || maxConsumers < 1) {
    throw new TypeError(`[v-queue] [http] Invalid \`maxConsumers\`: ${JSON.stringify(maxConsumers)}, expected an integer >= 1.`);
  }
  const logger = options.logger ?? console;
  return {
    driver: options.driver,
    dir: options.dir ?? "./queues",
    durability: options.durability ?? "fsync",
    start: options.start ?? "earliest",
    syncCommits: options.syncCommits ?? true,
    auth: resolveAuth(options.auth),
    limits,
    consumerIdleMs,
    maxConsumers,
    cors: resolveCors(options.cors),
    version: options.version ?? pkg.version,
    logger,
    logRequests: options.logRequests ?? false,
    onProblem: (problem) => logger.warn(`[v-queue] ${problem.code} in queue ${problem.queue}: ${problem.message}`),
  };
}

function resolveAuth(auth: AuthOptions | false | undefined): ResolvedAuth | undefined {
  if (!auth) return undefined;
  const users = auth.users ?? [];
  if (auth.enabled === false || (auth.enabled === undefined && users.length === 0)) return undefined;
  if (users.length === 0) throw new TypeError("[v-queue] [http] Auth is enabled but `auth.users` is empty: nobody could log in.");
  return {
    realm: auth.realm ?? "v-queue",
    users: users.map((user, i) => {
      if (typeof user?.username !== "string" || user.username.length === 0 || user.username.includes(":")) {
        throw new TypeError(`[v-queue] [http] auth.users[${i}]: \`username\` must be a non-empty string without ':' (RFC 7617).`);
      }
      if (typeof user.password !== "string") throw new TypeError(`[v-queue] [http] auth.users[${i}] (${user.username}): missing \`password\`.`);
      return { username: user.username, password: user.password, read: user.read ?? true, write: user.write ?? true };
    }),
  };
}
