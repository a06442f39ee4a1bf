import type { ArgsDef } from "citty";
import { consola, createConsola } from "consola";
import { createClient, type VQueueClient } from "../../client/index";
import type { QueueDriver } from "../../src/core/driver";
import type { LogLevel } from "../config";
import { checkDataDir } from "../data-dir";
import { DEFAULT_DIR } from "../defaults";
import { resolveDriver } from "../storage";
import { selectZstd } from "../zstd-native";
import { CliError, explain } from "./_errors";

export { CliError, explain } from "./_errors";

/** Flags shared by the commands that reach queues: on disk (`--dir`) or through a server (`--url`). */
export const targetArgs = {
  dir: { type: "string", description: "Data directory (direct access to the files)", default: DEFAULT_DIR, valueHint: "path" },
  storage: {
    type: "string",
    description:
      "Other storage instead of --dir: fs:<dir>, memory:, redis://host:port/db, redis+vq://host:port/db, redis+vq+sentinel://s1:26379,s2:26379/0?name=mymaster, unstorage-fs:<dir>",
    valueHint: "spec",
  },
  url: { type: "string", description: "Go through a running server instead, e.g. http://127.0.0.1:9093", valueHint: "url" },
  user: { type: "string", description: "Basic auth for --url, as name:password (or VQUEUE_USER)", valueHint: "name:password" },
} as const satisfies ArgsDef;

/** The confirmation flag of the destructive commands (purge, delete). */
export const yesArg = {
  yes: { type: "boolean", alias: "y", description: "Confirm: the command removes data and cannot be undone" },
} as const satisfies ArgsDef;

/** Refuses (exit 1) a destructive command without `--yes`: `what` says what it would do. */
export function requireYes(yes: boolean | undefined, what: string): void {
  if (!yes) throw new CliError(`Refusing to ${what} without --yes.`);
}

/**
 * The commands' own messages go to stderr: stdout is for the data (messages, JSON). At info
 * level whatever NODE_ENV says (consola would drop to warnings under NODE_ENV=test or CI).
 */
export const log = createConsola({ stdout: process.stderr, stderr: process.stderr, level: 3 });

/** `1 message`, `2 messages`, `1,000 messages`. */
export const plural = (count: number, noun: string): string => `${count.toLocaleString("en")} ${noun}${count === 1 ? "" : "s"}`;

/** The CLI's zstd (direct mode): the native one when it loads, else the WebAssembly one with a warning on stderr. */
export const cliZstd = selectZstd("auto", { report: (line) => log.warn(line) });

export const CONSOLA_LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 3, debug: 4, trace: 5 };

/** The storage of `--storage`, else the fs driver on `--dir`. */
export async function openStorage(args: { dir?: string; storage?: string }): Promise<QueueDriver> {
  if (!args.storage) await checkDataDir(args.dir ?? DEFAULT_DIR);
  try {
    return await resolveDriver(args);
  } catch (error) {
    throw new CliError(`Invalid --storage ${JSON.stringify(args.storage)}: ${(error as Error).message}`);
  }
}

/** Runs `run` on the storage of `--dir`/`--storage`, then lets it go; engine errors told as `what` failed. */
export async function withStorage<T>(target: { dir?: string; storage?: string }, what: string, run: (driver: QueueDriver) => Promise<T>): Promise<T> {
  const driver = await openStorage(target);
  try {
    return await run(driver).catch((error: unknown) => explain(error, `${what} in ${storageLabel(target)}`));
  } finally {
    await driver.dispose?.();
  }
}

/** Where `--dir`/`--storage` point, for messages. */
export const storageLabel = (args: { dir?: string; storage?: string }): string => args.storage ?? args.dir ?? DEFAULT_DIR;

/**
 * The client SDK on `--url`, with `--user` (or VQUEUE_USER), `name:password`, as Basic auth.
 * Its errors (`VQueueClientError`, `VQueueNetworkError`) are told to the user by describeError.
 */
export function apiClient(url: string, user: string | undefined): VQueueClient {
  const credentials = user ?? process.env.VQUEUE_USER;
  const colon = credentials?.indexOf(":") ?? -1;
  const auth =
    credentials === undefined || credentials === ""
      ? undefined
      : { username: colon < 0 ? credentials : credentials.slice(0, colon), password: colon < 0 ? "" : credentials.slice(colon + 1) };
  // Long: a command waits as long as the server works (a large push); long polls add their own wait.
  // Retries short: someone at a prompt hears of a wrong URL or a stopped server within seconds.
  return createClient({ baseURL: url, auth, timeout: 300_000, retryTimeoutMs: 2000 });
}

/** `push orders: 1 message (10/s)`. */
export const progressLine = (label: string, count: number, seconds: number): string =>
  `${label}: ${plural(count, "message")} (${Math.round(count / Math.max(seconds, 1e-3)).toLocaleString("en")}/s)`;

/** A one-line progress display on stderr (only on a terminal), updated at most 5 times a second. */
export function progress(label: string): { tick(count: number): void; done(): void } {
  const tty = process.stderr.isTTY === true && consola.level >= 3;
  const start = performance.now();
  let last = 0;
  let shown = false;
  const render = (count: number) => {
    process.stderr.write(`\r${progressLine(label, count, (performance.now() - start) / 1000)}\u001b[K`);
    shown = true;
  };
  return {
    tick(count) {
      if (!tty) return;
      const now = performance.now();
      if (now - last < 200) return;
      last = now;
      render(count);
    },
    done() {
      if (shown) process.stderr.write("\r\u001b[K");
    },
  };
}
