/**
 * Builds a playground app (playground/nitro, playground/nuxt) for real and runs its built
 * server (`node .output/server/index.mjs`) on a free loopback port, with a fresh data dir.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join, resolve } from "pathe";
import { freePort } from "../helpers/net";

const run = promisify(execFile);
export const ROOT = resolve(import.meta.dirname, "../..");

export interface HostApp {
  /** Folder under playground/. */
  dir: "nitro" | "nuxt";
  /** The build command (after `npx`). */
  build: string[];
  /** Prefix of the runtime config env variables: NITRO_ or NUXT_. */
  envPrefix: string;
}

export interface RunningHost {
  url: string;
  dataDir: string;
  process: ChildProcess;
  output: () => string;
  /** SIGTERM; resolves with the exit code (fails after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<number | null>;
}

/** Installs the app's dependencies when missing (`npm ci`) and builds it. Returns the timings in ms. */
export async function buildApp(app: HostApp): Promise<{ install: number; build: number }> {
  if (!existsSync(join(ROOT, "dist/nitro.mjs"))) throw new Error("dist/nitro.mjs is missing: run `npm run build` at the root first.");
  const cwd = join(ROOT, "playground", app.dir);
  const env = { ...process.env, NODE_ENV: "production", NUXT_TELEMETRY_DISABLED: "1" };
  let start = performance.now();
  if (!existsSync(join(cwd, "node_modules/.package-lock.json"))) {
    await run("npm", ["ci", "--no-audit", "--no-fund"], { cwd, env, maxBuffer: 64 << 20 });
  }
  const install = performance.now() - start;
  start = performance.now();
  await run("npx", app.build, { cwd, env, maxBuffer: 64 << 20 });
  return { install, build: performance.now() - start };
}

/** Starts the built server with its queues in a new temporary directory (set through the runtime config). */
export async function startApp(app: HostApp): Promise<RunningHost> {
  const cwd = join(ROOT, "playground", app.dir);
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), `vq-host-${app.dir}-`));
  const child = spawn(process.execPath, [".output/server/index.mjs"], {
    cwd,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", [`${app.envPrefix}V_QUEUE_DEFAULT_DIR`]: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  const url = `http://127.0.0.1:${port}`;

  // Ready once /_queue/health answers.
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`The ${app.dir} server exited: ${output}`);
    const ok = await fetch(`${url}/_queue/health`).then((r) => r.ok, () => false);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`The ${app.dir} server did not answer in 30 s: ${output}`);
    }
    await new Promise((done) => setTimeout(done, 100));
  }

  return {
    url,
    dataDir,
    process: child,
    output: () => output,
    async stop(timeoutMs = 15_000) {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGTERM");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, fail) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL");
          fail(new Error(`The ${app.dir} server did not exit ${timeoutMs} ms after SIGTERM: ${output}`));
        }, timeoutMs);
      });
      try {
        return await Promise.race([exited, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** Lock files left in a data dir (recursively). */
export function lockFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".lock"));
}

