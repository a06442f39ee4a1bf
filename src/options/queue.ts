// Over 300 lines: every queue and consumer option, its default and its check, in one place (options
// defaulted once).
import { defu } from "defu";
import { workersKvProblem } from "./workers-kv";
import { checkOption, integer, oneOf, throwProblems, type Check } from "../core/check";
import type { QueueDriver } from "../core/driver";
import { LOG_PREFIX, type QueueProblem } from "../core/errors";
import { MAX_BODY_SIZE } from "../format/record";
import { retentionProblems, type RetentionOptions } from "./retention";
import { loadZstd, type ZstdLoader } from "../compression/zstd";

export const DURABILITIES = ["fsync", "interval", "none"] as const;
export const START_POSITIONS = ["earliest", "latest"] as const;
export const COMPRESSIONS = ["none", "zstd"] as const;

/**
 * When a push is acknowledged:
 * - `"fsync"`: after its batch is written and fdatasync'd (group commit: pushes issued
 *   together share one fsync). Survives a crash of the process and of the machine.
 * - `"interval"`: after the write; an fsync runs every `fsyncIntervalMs`. A machine crash
 *   may lose up to that much; a process crash loses nothing acknowledged.
 * - `"none"`: after the write, never fsync'd (the crate's behaviour).
 */
export type Durability = (typeof DURABILITIES)[number];

/**
 * How new parts are written: `"none"`, v2 parts as the crate 0.2.x writes and reads them;
 * `"zstd"`, v3 parts (crate 0.3.x) whose bodies are compressed with a per-part dictionary,
 * which the crate 0.2.x cannot read.
 */
export type Compression = (typeof COMPRESSIONS)[number];

/** Where a consumer that has no saved position starts. */
export type StartPosition = (typeof START_POSITIONS)[number];

/** The one check of `durability`: the engine's, the HTTP runtime's, the config schema's and Nitro's. */
export const checkDurability: Check = oneOf(DURABILITIES);
/** The one check of `start` (see `checkDurability`). */
export const checkStart: Check = oneOf(START_POSITIONS);
/** The one check of `idempotencyWindowMs`: a second to a week (see `checkDurability`). */
export const checkIdempotencyWindow: Check = integer(1000, 7 * 24 * 3600 * 1000);
/** The one check of `maxDelayed` (see `checkDurability`). */
export const checkMaxDelayed: Check = integer(1, 100_000_000);
/** The one check of `compression` (see `checkDurability`). */
export const checkCompression: Check = oneOf(COMPRESSIONS);

export interface CommonOptions {
  /**
   * The storage: `fsDriver({ dir })`, `memoryDriver()`, ... Required by the engine; the
   * `v-queue` entry on Node makes the fs driver on its `dir` option when none is given.
   */
  driver?: QueueDriver;
  /**
   * Called for damage that recovery stepped over (torn tails, bad records, bad info lines).
   * @default a console.warn line
   */
  onProblem?: (problem: QueueProblem) => void;
  /**
   * The zstd implementation, for writing compressed parts and reading them: a function that
   * loads it, called at the first compressed part only. `nativeZstd` (`v-queue/zstd-native`,
   * Node only) is several times faster (docs/logs.md#compression); each reads the parts the other wrote.
   * @default the WebAssembly zstd (`zstd-codec`); the `v-queue` entry on Node: the native one
   * when it loads, else the WebAssembly one (`autoZstd`)
   */
  zstd?: ZstdLoader;
}

export interface QueueOptions extends CommonOptions {
  /** @default "fsync" */
  durability?: Durability;
  /** Period of the background fsync for `durability: "interval"`. @default 200 */
  fsyncIntervalMs?: number;
  /**
   * A part is closed, and a new one started, once it holds this many bytes.
   * @default 268435456 (256 MiB)
   */
  maxPartBytes?: number;
  /** Largest message body accepted by `push`. @default 67108864 (64 MiB) */
  maxMessageBytes?: number;
  /**
   * Start a new part when opening a queue whose current part is not empty (the crate 0.2.x
   * starts one on every reopen, 0.3.x reuses an empty current part; its readers expect it).
   * @default true
   */
  rollOnOpen?: boolean;
  /** Create the queue if it does not exist. @default true */
  create?: boolean;
  /**
   * `"zstd"` writes new parts as v3 with compressed bodies (docs/logs.md#compression): readers
   * of the crate 0.2.x cannot read those parts. Reading v3 parts needs no option.
   * @default "none"
   */
  compression?: Compression;
  /** zstd level of `compression: "zstd"`. @default 3 */
  compressionLevel?: number;
  /** Bodies under this many bytes are stored raw (as the crate does). @default 24 */
  compressionMinBytes?: number;
  /** Bytes of a part's first bodies (stored raw) that its dictionary is built from. @default 131072 */
  compressionSampleBytes?: number;
  /**
   * A zstd dictionary made offline (e.g. `zstd --train` on sample messages): with it, every
   * part is compressed from its first body with this dictionary (still written as the part's
   * `Q_dict`), nothing is learnt. A trained dictionary (starting with 37 A4 30 EC) or raw
   * content of 8 bytes to 1 MiB. @default undefined (each part builds its own)
   */
  compressionDictionary?: Uint8Array;
  /** A part's index (log/part-index.ts) has an entry every this many records: seeks scan at most this many. @default 1000 */
  indexInterval?: number;
  /** Deletes old parts in the background (retention/prune.ts). @default none: keep everything */
  retention?: RetentionOptions;
  /**
   * How long an idempotency key of `produce` is remembered (writer/idempotency.ts): a produce with a
   * key accepted this recently is not written again. Survives a restart. @default 300000 (5 minutes)
   */
  idempotencyWindowMs?: number;
  /** Most idempotency keys remembered at once; past it the oldest are forgotten first. @default 100000 */
  idempotencyMaxKeys?: number;
  /**
   * Most delayed messages pending at once (each holds some 60 bytes of memory in the writer):
   * a delayed produce past it is refused (`E_FULL`, nothing written). @default 1000000
   */
  maxDelayed?: number;
}

export interface ConsumerOptions extends CommonOptions {
  /** Where a consumer with no saved position starts. @default "earliest" */
  start?: StartPosition;
  /** fsync the position file on commit. @default true */
  syncCommits?: boolean;
  /**
   * How often a waiting consumer re-reads the small info files when the queue's writer
   * is in another process. In the writer's process, waits cost no I/O at all.
   * @default 100
   */
  pollIntervalMs?: number;
  /** Bytes read from a part per I/O. @default 1048576 */
  readChunkBytes?: number;
  /** Create the consumer if it has no saved position. @default true */
  create?: boolean;
}

/** Options of `purgeQueue`, `deleteQueue` and `deleteConsumer` (the driver is their first argument). */
export interface AdminOptions {
  /** Reports damage met on the way (a bad queue info line). @default a console.warn line */
  onProblem?: (problem: QueueProblem) => void;
  /** `"none"` skips the fsyncs of a purge's new part and positions (tests); any other value syncs them. @default "fsync" */
  durability?: Durability;
}

export interface ResolvedAdminOptions {
  driver: QueueDriver;
  onProblem: (problem: QueueProblem) => void;
  durability: Durability;
}

export interface ResolvedQueueOptions {
  driver: QueueDriver;
  onProblem: (problem: QueueProblem) => void;
  durability: Durability;
  fsyncIntervalMs: number;
  maxPartBytes: number;
  maxMessageBytes: number;
  rollOnOpen: boolean;
  create: boolean;
  compression: Compression;
  compressionLevel: number;
  compressionMinBytes: number;
  compressionSampleBytes: number;
  compressionDictionary: Uint8Array | undefined;
  indexInterval: number;
  retention?: RetentionOptions;
  idempotencyWindowMs: number;
  idempotencyMaxKeys: number;
  maxDelayed: number;
  zstd: ZstdLoader;
}

export interface ResolvedConsumerOptions {
  driver: QueueDriver;
  onProblem: (problem: QueueProblem) => void;
  zstd: ZstdLoader;
  start: StartPosition;
  syncCommits: boolean;
  pollIntervalMs: number;
  readChunkBytes: number;
  create: boolean;
}

export const defaultProblemReporter = (problem: QueueProblem): void => {
  console.warn(`${LOG_PREFIX} ${problem.code} in queue ${problem.queue}: ${problem.message}`);
};

/** Defaults of the writer's options (`QueueOptions`): the one place they are written. */
export const QUEUE_DEFAULTS = {
  durability: "fsync",
  fsyncIntervalMs: 200,
  maxPartBytes: 256 * 1024 * 1024,
  maxMessageBytes: 64 * 1024 * 1024,
  rollOnOpen: true,
  create: true,
  indexInterval: 1000,
  compression: "none",
  compressionLevel: 3,
  compressionMinBytes: 24,
  compressionSampleBytes: 128 * 1024,
  idempotencyWindowMs: 5 * 60 * 1000,
  idempotencyMaxKeys: 100_000,
  maxDelayed: 1_000_000,
} as const;

/** Defaults of the consumer's options (`ConsumerOptions`). */
export const CONSUMER_DEFAULTS = { start: "earliest", syncCommits: true, pollIntervalMs: 100, readChunkBytes: 1024 * 1024, create: true } as const;

/** Defaults of the admin calls' options (`AdminOptions`). */
export const ADMIN_DEFAULTS = { durability: "fsync" } as const;

export function resolveAdminOptions(driver: QueueDriver, options: AdminOptions): ResolvedAdminOptions {
  return resolveOptions<ResolvedAdminOptions>({ ...options, driver }, ADMIN_DEFAULTS, (o) => [checkDurability(o.durability, "durability")]);
}

export function resolveQueueOptions(options: QueueOptions): ResolvedQueueOptions {
  return resolveOptions<ResolvedQueueOptions>(options, QUEUE_DEFAULTS, (o) => [
    checkDurability(o.durability, "durability"),
    integer(1, 3_600_000)(o.fsyncIntervalMs, "fsyncIntervalMs"),
    integer(1024)(o.maxPartBytes, "maxPartBytes"),
    integer(1, MAX_BODY_SIZE)(o.maxMessageBytes, "maxMessageBytes"),
    checkCompression(o.compression, "compression"),
    integer(1, 19)(o.compressionLevel, "compressionLevel"),
    integer(5, MAX_BODY_SIZE)(o.compressionMinBytes, "compressionMinBytes"),
    integer(1024, 64 * 1024 * 1024)(o.compressionSampleBytes, "compressionSampleBytes"),
    checkDictionaryOption(o.compressionDictionary, o.compression),
    integer(1, 1_000_000_000)(o.indexInterval, "indexInterval"),
    checkIdempotencyWindow(o.idempotencyWindowMs, "idempotencyWindowMs"),
    integer(1, 10_000_000)(o.idempotencyMaxKeys, "idempotencyMaxKeys"),
    checkMaxDelayed(o.maxDelayed, "maxDelayed"),
    ...retentionProblems(o.retention),
  ]);
}

/** `compressionDictionary`, when given: a valid dictionary, and of use (only `compression: "zstd"` compresses). */
export function checkDictionaryOption(dictionary: unknown, compression: unknown): string | undefined {
  if (dictionary === undefined) return undefined;
  if (compression !== "zstd")
    return `Invalid compressionDictionary: it is used only with compression: "zstd" (compression is ${JSON.stringify(compression)}); set both, or neither.`;
  return checkDictionary(dictionary, "compressionDictionary");
}

/** The largest dictionary accepted in `compressionDictionary`. */
export const DICTIONARY_MAX_BYTES = 1024 * 1024;

/** A dictionary for `compressionDictionary`: bytes, trained (zstd's magic) or at least 8 bytes of raw content, at most 1 MiB. */
export const checkDictionary: Check = (value, name) => {
  if (!(value instanceof Uint8Array)) return `Invalid ${name}: use a Uint8Array (the bytes of a dictionary file, e.g. made by \`zstd --train\`).`;
  const trained = value[0] === 0x37 && value[1] === 0xa4 && value[2] === 0x30 && value[3] === 0xec;
  if (value.length > DICTIONARY_MAX_BYTES) return `Invalid ${name} of ${value.length} bytes: use at most ${DICTIONARY_MAX_BYTES} bytes (1 MiB).`;
  if (value.length < (trained ? 16 : 8))
    return `Invalid ${name} of ${value.length} bytes: ${trained ? "a trained dictionary this short is truncated" : "use at least 8 bytes of content"}.`;
  return undefined;
};

export function resolveConsumerOptions(options: ConsumerOptions): ResolvedConsumerOptions {
  return resolveOptions<ResolvedConsumerOptions>(options, CONSUMER_DEFAULTS, (o) => [
    checkStart(o.start, "start"),
    integer(1, 3_600_000)(o.pollIntervalMs, "pollIntervalMs"),
    integer(4096, 1024 * 1024 * 1024)(o.readChunkBytes, "readChunkBytes"),
  ]);
}

/** Options over their defaults, every problem (the driver's included) in one `E_OPTION`. */
function resolveOptions<T extends CommonOptions>(options: CommonOptions, defaults: object, checks: (resolved: T) => (string | undefined)[]): T {
  // A driver whose reads are billed calls (durable-object) asks consumers to poll less often than the default.
  const hint = "pollIntervalMs" in defaults && options.driver?.pollIntervalMs ? { pollIntervalMs: options.driver.pollIntervalMs } : {};
  const resolved = defu(options, hint, defaults, { onProblem: defaultProblemReporter, zstd: loadZstd }) as T;
  throwProblems([checkDriver(options.driver, "driver"), checkZstd(resolved.zstd, "zstd"), ...checks(resolved)]);
  return resolved;
}

export function checkInteger(name: string, value: unknown, min: number, max: number): void {
  checkOption(name, value, integer(min, max));
}

/** The storage every layer needs (the engine's options, the HTTP runtime's): present and a driver. */
export const checkDriver: Check = (driver, name) =>
  workersKvProblem(driver, name) ??
  (driver && typeof (driver as QueueDriver).openLog === "function"
    ? undefined
    : `${driver ? `Invalid ${name} (it has no \`openLog\` method)` : `Missing ${name}`}: pass one, e.g. \`fsDriver({ dir })\` from \`v-queue/drivers/fs\`, or \`memoryDriver()\`.`);

/** The `zstd` option: a function that loads an implementation. */
export const checkZstd: Check = (zstd, name) =>
  typeof zstd === "function"
    ? undefined
    : `Invalid ${name}: use a function that loads a zstd implementation (e.g. \`nativeZstd\` from \`v-queue/zstd-native\`), or leave it out for the WebAssembly one.`;

// --- Options of a consumer's calls ---

export interface ReadOptions {
  /** Most messages to return. @default 100 */
  max?: number;
  /** Stop once the bodies add up to this many bytes (at least one message is returned). @default 1048576 */
  maxBytes?: number;
  /**
   * Hand text (`S`) bodies out as their UTF-8 bytes, undecoded (`type` still says "string"):
   * for callers that pass bodies on as bytes, e.g. a binary HTTP response.
   * @default false
   */
  raw?: boolean;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up after this long; `wait` then resolves false. @default no limit */
  timeoutMs?: number;
}

export interface PollOptions extends ReadOptions, WaitOptions {}

export interface IterateOptions extends ReadOptions {
  signal?: AbortSignal;
  /**
   * Commit as the loop goes: a batch is committed once the loop body has finished with all
   * of it, and on `break` (or a throw) everything before the message in hand is committed,
   * so that message comes again (at-least-once).
   * @default true
   */
  autoCommit?: boolean;
}
