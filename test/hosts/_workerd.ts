/**
 * Runs a built `cloudflare-module` output (.output/server) in workerd through Miniflare, on a
 * loopback port, as a RunningHost, with the compatibility date, flags and vars of the app's
 * `wrangler.json` (as `wrangler deploy` would), its Durable Object bindings kept in the data dir
 * (a restart on the same dir finds them). Every module is listed: Miniflare's own module walk
 * refuses the engine's optional `import(OTEL_API)` (a specifier in a variable).
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import type { Readable } from "node:stream";
import { join } from "pathe";
import { startMiniflare } from "../workerd/_miniflare";
import { appDir, appName, waitHealthy, type HostApp, type RunningHost } from "./_host";

export interface WorkerdOptions {
  /** Instead of the app's `wrangler.json`. */
  config?: WranglerConfig;
  /** Text bindings instead of the wrangler config's `vars`. */
  vars?: Record<string, string>;
  /** Wait for `/_queue/health` to answer 200 (else only for workerd to listen). @default true */
  healthy?: boolean;
}

export interface WranglerConfig {
  name?: string;
  main?: string;
  compatibility_date?: string;
  compatibility_flags?: string[];
  vars?: Record<string, string>;
  durable_objects?: { bindings: { name: string; class_name: string }[] };
  migrations?: { tag: string; new_classes?: string[]; new_sqlite_classes?: string[] }[];
}

/** Runs the app; its Durable Objects, if it binds any, kept in `dataDir` (a new temporary directory when not given). */
export function startWorkerd(options: WorkerdOptions = {}): (app: HostApp, dataDir?: string) => Promise<RunningHost> {
  return async (app, dir) => {
    const configPath = join(appDir(app), "wrangler.json");
    const config = options.config ?? (existsSync(configPath) ? (JSON.parse(readFileSync(configPath, "utf8")) as WranglerConfig) : {});
    // A class is SQLite-backed when a migration made it so (as on Cloudflare); Miniflare takes that per binding.
    const sqlite = new Set(config.migrations?.flatMap((m) => m.new_sqlite_classes ?? []));
    const bindings = config.durable_objects?.bindings ?? [];
    const durableObjects = Object.fromEntries(bindings.map((b) => [b.name, { className: b.class_name, useSQLite: sqlite.has(b.class_name) }]));
    const dataDir = dir ?? (bindings.length > 0 ? mkdtempSync(join(tmpdir(), "vq-host-workerd-")) : "");
    const root = join(appDir(app), ".output/server");
    const files = readdirSync(root, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".mjs"));
    // The entry first: Miniflare takes the first module as the worker's.
    const ordered = ["index.mjs", ...files.filter((file) => file !== "index.mjs")];
    let output = "";
    const mf = await startMiniflare({
      modulesRoot: root,
      modules: ordered.map((file) => ({ type: "ESModule" as const, path: join(root, file) })),
      compatibilityDate: config.compatibility_date ?? "2025-10-01",
      compatibilityFlags: config.compatibility_flags ?? [],
      bindings: options.vars ?? config.vars ?? {},
      durableObjects,
      ...(dataDir ? { durableObjectsPersist: dataDir } : {}),
      host: "127.0.0.1",
      port: 0,
      handleRuntimeStdio(stdout: Readable, stderr: Readable) {
        stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
        stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
      },
    });
    let disposed = false;
    const dispose = async () => {
      if (disposed) return;
      disposed = true;
      await mf.dispose();
    };
    const url = (await mf.ready).origin;
    if (options.healthy !== false)
      await waitHealthy(
        url,
        appName(app),
        () => output,
        () => disposed,
        () => void dispose(),
      );
    return {
      url,
      dataDir,
      output: () => output,
      running: () => !disposed,
      kill: () => void dispose(),
      async stop() {
        await dispose();
        return 0;
      },
    };
  };
}
