/**
 * The standalone v-queue server: the HTTP API (`v-queue/runtime`) on the Node fs driver,
 * served by `node:http`. `v-queue serve` runs it; `serveQueues()` is the same from code.
 */
import type { RequestListener, Server } from "node:http";
import { consola } from "consola";
import { toNodeHandler } from "h3/node";
import { createQueueHandler, type QueueAppOptions, type QueueHandler } from "../runtime/index";
import { checkDataDir } from "./data-dir";
import { listenHttp, type HttpListener } from "./http-listener";
import { withProcessStats } from "./process-stats";
import { recordServer } from "./server-record";
import { fsDataDir, resolveDriver } from "./storage";
import { selectZstd, type ZstdChoice } from "./zstd-native";
import type { ZstdLoader } from "../src/compression/zstd";
import { VQueueError } from "../src/core/errors";
import { sleep } from "../src/core/sleep";

export interface ServeOptions extends Omit<QueueAppOptions, "zstd"> {
  /**
   * The zstd library (docs/logs.md#compression): `"native"` (zstd-napi), `"wasm"` (zstd-codec),
   * `"auto"` (native when zstd-napi is installed and loads, else wasm), or a loader. @default "auto"
   */
  zstd?: ZstdChoice | ZstdLoader;
  /** Data directory of the fs driver, when neither `driver` nor `storage` is given. @default "./queues" */
  dir?: string;
  /**
   * Other storage than files in `dir`: a spec for `resolveStorageDriver` (`redis://host:port/db`,
   * `memory:`, `unstorage-fs:./dir`, ...). Ignored when `driver` is given.
   */
  storage?: string;
  /** Interface to bind. Give "0.0.0.0" (or "::") to accept other machines. @default "127.0.0.1" */
  host?: string;
  /** @default 9093 (as the Rust v-queue-server); 0 picks a free port */
  port?: number;
  /** Stop on SIGINT/SIGTERM: end long polls, finish the writes in flight, close every file, then exit. @default false */
  handleSignals?: boolean;
  /** Print the URL once listening. @default false */
  showURL?: boolean;
}

export interface QueueServer {
  url: string;
  port: number;
  handler: QueueHandler;
  server: Server;
  /** Graceful: ends long polls (answered with no messages), waits for requests in flight, closes files and the socket. */
  close(): Promise<void>;
}

/** Serves the HTTP API of the queues in `dir` (or on `driver`). */
export async function serveQueues(options: ServeOptions = {}): Promise<QueueServer> {
  const { host = "127.0.0.1", port = 9093, handleSignals = false, showURL = false, driver, storage, dir, zstd = "auto", ...appOptions } = options;
  // A data directory that is a file, or not writable, fails here rather than on the first write.
  const dataDir = fsDataDir({ driver, storage, dir });
  if (dataDir) await checkDataDir(dataDir, { create: true, writable: true });
  const zstdLoader = typeof zstd === "function" ? zstd : selectZstd(zstd, { report: (line) => consola.warn(line) });
  // Asked for by name, the native zstd must be there: a missing one stops the server here, not at the first compressed part.
  if (zstd === "native") await zstdLoader();
  const handler = createQueueHandler({
    // consola's level (`--log-level`) decides which of these lines are printed.
    logger: {
      error: (m, ...a) => consola.error(m, ...a),
      warn: (m, ...a) => consola.warn(m, ...a),
      info: (m, ...a) => consola.info(m, ...a),
      debug: (m, ...a) => consola.debug(m, ...a),
    },
    ...appOptions,
    metrics: withProcessStats(appOptions.metrics),
    zstd: zstdLoader,
    driver: await resolveDriver({ driver, storage, dir }),
  });
  let listener: HttpListener;
  try {
    await readyThroughOutages(handler, STARTUP_RETRY_MS);
    listener = await listenHttp(toNodeHandler(handler.app) as RequestListener, host, port);
  } catch (error) {
    await handler.close();
    throw error;
  }
  const actualPort = listener.port;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${actualPort}`;
  if (showURL) consola.log(`  ➜ ${url}/`);
  // Where this server listens, for the CLI's hint when the directory's files are held (E_LOCKED); only a hint, so a failed write is no failure.
  const forget = dataDir ? await recordServer(dataDir, url, actualPort).catch(() => async () => {}) : async () => {};

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
      await forget();
      // Queues first: long polls end, writes in flight finish, files close; then the socket.
      await handler.close();
      await listener.close();
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    consola.info(`${signal}: finishing requests in flight and closing the queues...`);
    close().then(
      () => {
        consola.info("Closed.");
        process.exit(0);
      },
      (error: unknown) => {
        consola.error("Shutdown failed:", error);
        process.exit(1);
      },
    );
  };
  if (handleSignals) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  return { url, port: actualPort, handler, server: listener.server, close };
}

/** How long a server keeps trying to reach its storage at start (a Redis failover takes seconds). */
const STARTUP_RETRY_MS = 60_000;

/**
 * `handler.ready()` (declaring the configured partitioned queues), tried again while the
 * storage fails with `E_IO` (unreachable, failing over) for up to `retryMs`: a server restarted
 * during an outage starts once it ends, instead of exiting. Other errors fail at once.
 */
async function readyThroughOutages(handler: { ready(): Promise<void> }, retryMs: number): Promise<void> {
  const deadline = Date.now() + retryMs;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await handler.ready();
    } catch (error) {
      if (!VQueueError.isError(error) || error.code !== "E_IO" || Date.now() + delay > deadline) throw error;
      consola.warn(`The storage failed at start (${error.message}); trying again in ${delay} ms.`);
      await sleep(delay);
    }
  }
}
