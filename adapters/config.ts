/**
 * The server's configuration, the UnJS way (c12): defaults < config file (`vqueue.config.*`,
 * `.vqueuerc`, or `--config FILE`) < environment (`VQUEUE_*`, `.env` read) < command-line flags.
 * c12 is an optional peer (it brings a dozen packages an app that mounts the module never uses):
 * without it the server runs on the environment and the flags, and a config file stops it,
 * naming the package to install.
 */
import { createDefu } from "defu";
import { readdir, readFile } from "node:fs/promises";
import { parseEnv } from "node:util";
import { isAbsolute, join, resolve } from "pathe";
import { CONSUMER_DEFAULTS, QUEUE_DEFAULTS, checkDictionary } from "../src/options/queue";
import type { AuthOptions, AuthUser, CorsOptions, QueueAppLimits } from "../runtime/index";
import type { Compression, Durability, StartPosition } from "../src/options/queue";
import type { RetentionOptions } from "../src/options/retention";
import type { SharedSettings } from "../src/options/shared";
import type { MonitorOptions, QueueSettings } from "../runtime/options";
import { ConfigError, configProblems, valueProblems, type LOG_LEVELS } from "./config-schema";
import { DEFAULT_DIR } from "./defaults";
import { isMissingPackage } from "./missing-package";
import type { ZstdChoice } from "./zstd-native";

export { ConfigError } from "./config-schema";

export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a config file may hold (`export default { ... }` in `vqueue.config.ts`, or JSON). */
export interface VQueueConfig {
  /** Data directory. @default "./queues" */
  dir?: string;
  /** Other storage instead of files in `dir`, e.g. `redis://127.0.0.1:6379/0` (see `resolveStorageDriver`). */
  storage?: string;
  /** @default "127.0.0.1" */
  host?: string;
  /** @default 9093 */
  port?: number;
  /** @default "fsync" */
  durability?: Durability;
  /** `"zstd"` writes new parts compressed (v3, unreadable by the crate 0.2.x). @default "none" */
  compression?: Compression;
  /**
   * A zstd dictionary file (e.g. made by `zstd --train`), read at start: with `compression:
   * "zstd"`, every part is compressed with it (docs/logs.md#compression). Relative to the current
   * directory. @default none (each part builds its own)
   */
  compressionDictionary?: string;
  /**
   * The zstd library: `"native"` (the npm package zstd-napi, an optional peer the user installs;
   * fails to start without it), `"wasm"` (zstd-codec, WebAssembly) or `"auto"` (native when it is
   * installed and loads, else wasm; with a warning when it is installed and does not load). Each
   * reads the parts the other wrote. @default "auto"
   */
  zstd?: ZstdChoice;
  /** Where a new consumer starts. @default "earliest" */
  start?: StartPosition;
  /** @default true */
  syncCommits?: boolean;
  /** Consumers open at once (see the runtime option). @default 4096 */
  maxConsumers?: number;
  /** Close a consumer unused this long (sooner near `maxConsumers`). @default 300000 */
  consumerIdleMs?: number;
  /** How long a produce's `Idempotency-Key` is remembered, across restarts (1000 to 604800000). @default 300000 */
  idempotencyWindowMs?: number;
  /** Most delayed messages pending per queue; past it a delayed produce is answered 507 `E_FULL`. @default 1000000 */
  maxDelayed?: number;
  /** Basic auth users and rights; on when users are given, unless `false` (or `--no-auth`). */
  auth?: AuthOptions | false;
  limits?: Partial<QueueAppLimits>;
  /** CORS for browser clients on other origins, e.g. `{ "origin": ["https://app.example.com"] }`. @default off */
  cors?: CorsOptions | false;
  /** @default "info" */
  logLevel?: LogLevel;
  /** The dashboard page at `/`, behind the same auth as the API. @default true */
  dashboard?: boolean;
  /** Retention of every queue, e.g. `{ "maxAgeMs": 604800000, "maxBytes": 10e9 }` (docs/operating.md#retention-the-part-index-and-seek-by-time). @default none */
  retention?: RetentionOptions;
  /** Shared consumers' lease time, bounds, dead letters, rate limits (`limiter`, per group `groupLimiter`) and outcomes kept (`outcomes`), e.g. `{ "leaseMs": 60000, "maxDeliveries": 3, "limiter": { "max": 100, "durationMs": 1000 } }` (docs/work-queues.md). @default the engine's */
  shared?: SharedSettings;
  /**
   * Per-queue settings: `retention` replaces the default for the queues named (none when not given), `shared` is laid
   * over `shared`, `partitions` declares the queue partitioned at start:
   * `{ "orders": { "retention": { "maxParts": 10 }, "shared": { "maxDeliveries": 3 }, "partitions": 6 } }`.
   */
  queues?: Record<string, QueueSettings>;
  /** The monitor behind the dashboard and `/metrics`: `{ "sampleMs": 1000, "historyPoints": 300, "idleMs": 600000, "firstAnswerMs": 50 }` (docs/operating.md#monitoring). */
  monitor?: MonitorOptions;
  /** `GET /metrics` (Prometheus): `true` behind auth, `{ "open": true }` without, `false` no route (docs/operating.md#metrics). @default true */
  metrics?: boolean | { open?: boolean };
}

export interface ResolvedServeConfig extends Required<
  Pick<VQueueConfig, "dir" | "host" | "port" | "durability" | "compression" | "zstd" | "start" | "syncCommits" | "logLevel">
> {
  auth: AuthOptions | false;
  limits: Partial<QueueAppLimits>;
  storage?: string;
  compressionDictionary?: string;
  dashboard?: boolean;
  /** The config file that was read, if any. */
  configFile?: string;
}

export const CONFIG_DEFAULTS: ResolvedServeConfig = {
  dir: DEFAULT_DIR,
  host: "127.0.0.1",
  port: 9093,
  durability: QUEUE_DEFAULTS.durability,
  compression: QUEUE_DEFAULTS.compression,
  zstd: "auto",
  start: CONSUMER_DEFAULTS.start,
  syncCommits: CONSUMER_DEFAULTS.syncCommits,
  logLevel: "info",
  auth: false,
  limits: {},
};

export interface LoadServeConfigOptions {
  cwd?: string;
  /** A config file given on the command line (must exist). */
  configFile?: string;
  /** Flags given on the command line: they win. */
  overrides?: VQueueConfig;
  env?: Record<string, string | undefined>;
}

export async function loadServeConfig(options: LoadServeConfigOptions = {}): Promise<ResolvedServeConfig> {
  const env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? ".");
  // Before the environment is read, so that its VQUEUE_* variables count.
  await readDotenv(cwd, env);
  const overrides = mergeDefined(envConfig(env), options.overrides ?? {});
  const c12 = await import("c12").catch((error: unknown) => {
    if (isMissingPackage(error, "c12")) return undefined;
    throw error;
  });
  let resolved: ResolvedServeConfig;
  let file: string | undefined;
  if (c12) {
    const loaded = await c12.loadConfig<VQueueConfig>({
      name: "vqueue",
      cwd,
      configFile: options.configFile,
      configFileRequired: options.configFile !== undefined,
      rcFile: ".vqueuerc",
      globalRc: false,
      packageJson: false,
      dotenv: false,
      defaults: CONFIG_DEFAULTS,
      merger: replaceArrays,
      overrides,
    });
    resolved = loaded.config as ResolvedServeConfig;
    // c12 gives back the bare name when no file was found, the absolute path when one was.
    file = loaded.configFile && isAbsolute(loaded.configFile) ? loaded.configFile : undefined;
  } else {
    const named = options.configFile ?? (await readdir(cwd).catch(() => [])).find((name) => CONFIG_FILE.test(name));
    if (named)
      throw new ConfigError([
        `Reading the config file ${named} needs the npm package c12, which is not installed (an optional peer dependency of v-queue): install it beside v-queue (\`npm install c12\`), or give the settings as VQUEUE_* variables and flags.`,
      ]);
    resolved = replaceArrays(overrides, CONFIG_DEFAULTS) as ResolvedServeConfig;
  }
  // The whole merged config against one schema: every problem at once, before anything starts.
  const problems = configProblems(resolved);
  if (problems.length > 0) throw new ConfigError(problems, file);
  if (file) resolved.configFile = file;
  return resolved;
}

/** The files c12 would read in the directory (any extension it knows). */
const CONFIG_FILE = /^(vqueue\.config\.\w+|\.vqueuerc)$/;

/** `.env` of `cwd` into `env`, as c12 read it: a variable already set keeps its value. */
async function readDotenv(cwd: string, env: Record<string, string | undefined>): Promise<void> {
  const text = await readFile(join(cwd, ".env"), "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT" || error.code === "EISDIR") return undefined;
    throw error;
  });
  if (text === undefined) return;
  for (const [key, value] of Object.entries(parseEnv(text))) env[key] ??= value;
}

/** The environment variables of the config's keys (each checked as the key, named by the variable). */
const ENV_KEYS = {
  VQUEUE_DIR: "dir",
  VQUEUE_STORAGE: "storage",
  VQUEUE_HOST: "host",
  VQUEUE_PORT: "port",
  VQUEUE_DURABILITY: "durability",
  VQUEUE_COMPRESSION: "compression",
  VQUEUE_COMPRESSION_DICTIONARY: "compressionDictionary",
  VQUEUE_ZSTD: "zstd",
  VQUEUE_LOG_LEVEL: "logLevel",
} as const satisfies Record<string, keyof VQueueConfig>;

/**
 * `VQUEUE_DIR`, `VQUEUE_STORAGE`, `VQUEUE_HOST`, `VQUEUE_PORT`, `VQUEUE_DURABILITY`, `VQUEUE_LOG_LEVEL`, ... (`ENV_KEYS`),
 * `VQUEUE_NO_AUTH=1`, `VQUEUE_USERS="alice:secret,bob:pw"` (full rights). A bad value is a
 * ConfigError naming the variable and its value (`Invalid VQUEUE_PORT "abc"`), every one at once.
 */
export function envConfig(env: Record<string, string | undefined>): VQueueConfig {
  const config: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, key] of Object.entries(ENV_KEYS)) {
    const text = env[name];
    if (!text) continue;
    // A port is a number: digits only ("9093"), anything else is told as the text it was.
    const value = key === "port" && /^\d+$/.test(text.trim()) ? Number(text) : text;
    problems.push(...valueProblems(key, value, name));
    config[key] = value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  if (env.VQUEUE_USERS) config.auth = { users: parseUsers(env.VQUEUE_USERS) };
  if (env.VQUEUE_NO_AUTH && env.VQUEUE_NO_AUTH !== "0" && env.VQUEUE_NO_AUTH !== "false") config.auth = false;
  return config as VQueueConfig;
}

/** The bytes of the `compressionDictionary` file, checked as the engine checks the option; a ConfigError saying what is wrong. */
export async function readCompressionDictionary(path: string, cwd = process.cwd()): Promise<Uint8Array> {
  const file = resolve(cwd, path);
  const bytes = await readFile(file).catch((error: NodeJS.ErrnoException) => {
    const why = error.code === "ENOENT" ? "no such file" : error.code === "EISDIR" ? "it is a directory" : error.message;
    throw new ConfigError([
      `Cannot read compressionDictionary ${JSON.stringify(path)} (${file}): ${why}. Make one with \`zstd --train -o ${path} <sample files>\`, or remove the option.`,
    ]);
  });
  const problem = checkDictionary(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length), `compressionDictionary ${JSON.stringify(path)}`);
  if (problem) throw new ConfigError([problem]);
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

/** `"alice:secret,bob:pw"` → users with full rights. */
export function parseUsers(text: string): AuthUser[] {
  return text
    .split(",")
    .filter((s) => s.trim())
    .map((entry) => {
      const colon = entry.indexOf(":");
      if (colon <= 0) throw new ConfigError([`Invalid user ${JSON.stringify(entry)} in VQUEUE_USERS: expected "name:password".`]);
      return { username: entry.slice(0, colon).trim(), password: entry.slice(colon + 1) };
    });
}

/** `"0.0.0.0:9093"`, `"[::1]:9093"` or `":9093"` (the Rust server's `--bind`). */
export function parseBind(bind: string): { host?: string; port?: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*))(?::(\d{1,5}))?$/.exec(bind);
  if (!match) throw new ConfigError([`Invalid --bind ${JSON.stringify(bind)}: expected host:port.`]);
  const host = match[1] ?? match[2];
  return { host: host || undefined, port: match[3] ? Number(match[3]) : undefined };
}

/** Merges layers like defu, except that a higher layer's array replaces a lower one's (users are not concatenated). */
const replaceArrays = createDefu((object, key, value) => {
  if (!Array.isArray(value)) return false;
  (object as Record<string, unknown>)[key as string] = value;
  return true;
}) as (...sources: (VQueueConfig | null | undefined)[]) => VQueueConfig;

function mergeDefined<T extends object>(...layers: T[]): T {
  const out = {} as T;
  for (const layer of layers) for (const [k, v] of Object.entries(layer)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
