import type { ArgsDef } from "citty";
import { consola, createConsola } from "consola";
import type { QueueDriver } from "../../src/driver";
import type { LogLevel } from "../config";
import { checkDataDir } from "../data-dir";
import fsDriver from "../drivers/fs";
import { resolveStorageDriver } from "../storage";
import { CliError } from "./_errors";

export { CliError, explain } from "./_errors";

/** Flags shared by the commands that reach queues: on disk (`--dir`) or through a server (`--url`). */
export const targetArgs = {
  dir: { type: "string", description: "Data directory (direct access to the files)", default: "./queues", valueHint: "path" },
  storage: { type: "string", description: "Other storage instead of --dir: fs:<dir>, memory:, redis://host:port/db, unstorage-fs:<dir>", valueHint: "spec" },
  url: { type: "string", description: "Go through a running server instead, e.g. http://127.0.0.1:9093", valueHint: "url" },
  user: { type: "string", description: "Basic auth for --url, as name:password (or VQUEUE_USER)", valueHint: "name:password" },
} as const satisfies ArgsDef;

/**
 * The commands' own messages go to stderr: stdout is for the data (messages, JSON). At info
 * level whatever NODE_ENV says (consola would drop to warnings under NODE_ENV=test or CI).
 */
export const log = createConsola({ stdout: process.stderr, stderr: process.stderr, level: 3 });

/** `1 message`, `2 messages`, `1,000 messages`. */
export const plural = (count: number, noun: string): string => `${count.toLocaleString("en")} ${noun}${count === 1 ? "" : "s"}`;

export const CONSOLA_LEVELS: Record<LogLevel, number> = { error: 0, warn: 1, info: 3, debug: 4, trace: 5 };

/** The storage of `--storage`, else the fs driver on `--dir`. */
export async function openStorage(args: { dir?: string; storage?: string }): Promise<QueueDriver> {
  if (!args.storage) {
    await checkDataDir(args.dir ?? "./queues");
    return fsDriver({ dir: args.dir ?? "./queues" });
  }
  try {
    return await resolveStorageDriver(args.storage);
  } catch (error) {
    throw new CliError(`Invalid --storage ${JSON.stringify(args.storage)}: ${(error as Error).message.replace(/^\[v-queue\] /, "")}`);
  }
}

/** Where `--dir`/`--storage` point, for messages. */
export const storageLabel = (args: { dir?: string; storage?: string }): string => args.storage ?? args.dir ?? "./queues";

/** A small HTTP client for --url. */
export function httpClient(baseURL: string, user: string | undefined) {
  const base = baseURL.replace(/\/+$/, "");
  const headers: Record<string, string> = {};
  const credentials = user ?? process.env.VQUEUE_USER;
  if (credentials) headers.authorization = `Basic ${Buffer.from(credentials).toString("base64")}`;
  return async (path: string, init: RequestInit = {}): Promise<Response> => {
    let res: Response;
    try {
      res = await fetch(base + path, { ...init, headers: { ...headers, ...(init.headers as Record<string, string>) } });
    } catch (error) {
      if ((error as Error).name === "AbortError") throw error;
      throw new CliError(`Cannot reach ${base}: ${((error as Error).cause as Error)?.message ?? (error as Error).message}`);
    }
    if (!res.ok) {
      const body = (await res.json().catch(() => undefined)) as { error?: { code?: string; message?: string } } | undefined;
      throw new CliError(`${init.method ?? "GET"} ${path}: ${res.status} ${body?.error?.code ?? ""} ${body?.error?.message ?? res.statusText}`.trim());
    }
    return res;
  };
}

/** `push orders: 1 message (10/s)`. */
export const progressLine = (label: string, count: number, seconds: number): string => `${label}: ${plural(count, "message")} (${Math.round(count / Math.max(seconds, 1e-3)).toLocaleString("en")}/s)`;

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
