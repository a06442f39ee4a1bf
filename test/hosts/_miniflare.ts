/**
 * Runs a built `cloudflare-module` output (.output/server) in workerd through Miniflare, on a
 * loopback port, as a RunningHost. Every module is listed: Miniflare's own module walk refuses
 * the engine's optional `import(OTEL_API)` (a specifier in a variable).
 */
import { readdirSync } from "node:fs";
import type { Readable } from "node:stream";
import { join } from "pathe";
import { Miniflare } from "miniflare";
import { appDir, appName, waitHealthy, type HostApp, type RunningHost } from "./_host";

export interface WorkerdOptions {
  /** Cloudflare compatibility flags (the wrangler config's `compatibility_flags`). */
  compatibilityFlags?: string[];
  /** Text bindings (the wrangler config's `vars`): with `nodejs_compat` they reach `process.env`, so the runtime config. */
  bindings?: Record<string, string>;
  /** Wait for `/_queue/health` to answer 200 (else only for workerd to listen). @default true */
  healthy?: boolean;
}

export function startWorkerd(options: WorkerdOptions = {}): (app: HostApp) => Promise<RunningHost> {
  return async (app) => {
    const root = join(appDir(app), ".output/server");
    const files = readdirSync(root, { recursive: true, encoding: "utf8" }).filter((file) => file.endsWith(".mjs"));
    // The entry first: Miniflare takes the first module as the worker's.
    const ordered = ["index.mjs", ...files.filter((file) => file !== "index.mjs")];
    let output = "";
    const mf = new Miniflare({
      modulesRoot: root,
      modules: ordered.map((file) => ({ type: "ESModule" as const, path: join(root, file) })),
      compatibilityDate: "2025-10-01",
      compatibilityFlags: options.compatibilityFlags ?? [],
      bindings: options.bindings ?? {},
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
    if (options.healthy !== false) await waitHealthy(url, appName(app), () => output, () => disposed, () => void dispose());
    return {
      url,
      dataDir: "",
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
