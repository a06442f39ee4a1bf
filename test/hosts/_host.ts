/**
 * Builds a playground app (playground/nitro, playground/nuxt) for real and runs its built
 * server (`node .output/server/index.mjs`, or the preset's command) on a free loopback port,
 * with a fresh data dir.
 */
import { execFile, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join, resolve } from "pathe";
import { freePort } from "../helpers/net";
import { sleep } from "../helpers/sleep";

const run = promisify(execFile);
export const ROOT = resolve(import.meta.dirname, "../..");

export interface HostApp {
  /** Folder under playground/. */
  dir: "nitro" | "nuxt";
  /** The build command (after `npx`). */
  build: string[];
  /** Prefix of the runtime config env variables: NITRO_ or NUXT_. */
  envPrefix: string;
  /** Where it is built and run: default playground/<dir> (a preset's test builds a copy, see _preset.ts). */
  cwd?: string;
  /** The built server's command, run in `cwd` (or its subfolder `in`): default `node .output/server/index.mjs`. */
  start?: { command: string; args: string[]; in?: string };
  /** Installs its packages: default `npm ci` in playground/<dir> when its node_modules is missing. */
  install?: () => Promise<unknown>;
  /** Its name in titles and errors: default `dir`. */
  name?: string;
  /** The path that answers 2xx once it serves: default `/_queue/health` (an app that serves no API has its own). */
  ready?: string;
}

export interface RunningHost {
  url: string;
  dataDir: string;
  output: () => string;
  /** Not exited (nor disposed). */
  running(): boolean;
  /** SIGKILL (or dispose), without waiting. */
  kill(): void;
  /** SIGTERM; resolves with the exit code, or the signal that ended it (fails after `timeoutMs`). */
  stop(timeoutMs?: number): Promise<number | NodeJS.Signals | null>;
}

export const appName = (app: HostApp): string => app.name ?? app.dir;
export const appDir = (app: HostApp): string => app.cwd ?? join(ROOT, "playground", app.dir);
const startOf = (app: HostApp) => app.start ?? { command: process.execPath, args: [".output/server/index.mjs"] };
/** The start command as a reader would type it (node for process.execPath). */
export const startLabel = (app: HostApp): string => {
  const { command, args } = startOf(app);
  const line = [command === process.execPath ? "node" : command.split("/").pop(), ...args].join(" ");
  return app.start?.in ? `cd ${app.start.in} && ${line}` : line;
};

const builds = new Map<string, Promise<{ install: number; build: number }>>();

/** Installs the app's dependencies (`app.install`, or the playground's `npm ci` when missing) and builds the app, once per test file (several suites may run one build). Returns the timings in ms. */
export function buildApp(app: HostApp): Promise<{ install: number; build: number }> {
  const key = `${appDir(app)}\0${app.build.join(" ")}`;
  let built = builds.get(key);
  if (!built) {
    built = buildOnce(app);
    builds.set(key, built);
    built.catch(() => builds.delete(key));
  }
  return built;
}

async function buildOnce(app: HostApp): Promise<{ install: number; build: number }> {
  if (!existsSync(join(ROOT, "dist/nitro.mjs"))) throw new Error("dist/nitro.mjs is missing: run `npm run build` at the root first.");
  const playground = join(ROOT, "playground", app.dir);
  const env = { ...process.env, NODE_ENV: "production", NUXT_TELEMETRY_DISABLED: "1" };
  let start = performance.now();
  if (app.install) await app.install();
  else await installPlayground(playground, env);
  const install = performance.now() - start;
  start = performance.now();
  await run("npx", app.build, { cwd: appDir(app), env, maxBuffer: 64 << 20 });
  return { install, build: performance.now() - start };
}

/**
 * `npm ci` in the playground when its node_modules is missing. Test files build apps at once, each
 * with the playground's node_modules (in place or linked), so one installs while the others wait:
 * a lock file holding the installer's pid, taken over when that process is gone.
 */
export async function installPlayground(playground: string, env: NodeJS.ProcessEnv): Promise<void> {
  const installed = () => existsSync(join(playground, "node_modules/.package-lock.json"));
  const lock = installLock(playground);
  while (!installed()) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx" });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      if (!installerAlive(lock)) rmSync(lock, { force: true });
      await sleep(500);
      continue;
    }
    try {
      if (!installed()) await run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: playground, env, maxBuffer: 64 << 20 });
    } finally {
      rmSync(lock, { force: true });
    }
  }
}

/** The playground's install lock: not in it (`npm ci` empties node_modules, and a lock left by a killed run must not show in git). */
export const installLock = (playground: string): string => join(tmpdir(), `vq-install-${playground.replace(/\W+/g, "-")}.lock`);

/** Whether the process named in `lock` still runs (an empty or vanished file: its writer is still at it). */
function installerAlive(lock: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(lock, "utf8").trim() || "0");
  } catch {
    return true;
  }
  if (!pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Starts the built server with its queues in `dataDir` (a new temporary directory when not given; set through the runtime config). */
export async function startApp(app: HostApp, dataDir = mkdtempSync(join(tmpdir(), `vq-host-${appName(app).replace(/\W/g, "-")}-`))): Promise<RunningHost> {
  const name = appName(app);
  const port = await freePort();
  const { command, args, in: sub = "." } = startOf(app);
  const child = spawn(command, args, {
    cwd: join(appDir(app), sub),
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", [`${app.envPrefix}V_QUEUE_DEFAULT_DIR`]: dataDir },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const exited = new Promise<number | NodeJS.Signals | null>((done) => child.once("exit", (code, signal) => done(code ?? signal)));
  const url = `http://127.0.0.1:${port}`;

  await waitHealthy(
    url,
    name,
    () => output,
    () => child.exitCode !== null,
    () => child.kill("SIGKILL"),
    app.ready,
  );

  return {
    url,
    dataDir,
    output: () => output,
    running: () => child.exitCode === null && child.signalCode === null,
    kill: () => child.kill("SIGKILL"),
    async stop(timeoutMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode ?? child.signalCode;
      child.kill("SIGTERM");
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<never>((_, fail) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL");
          fail(new Error(`The ${name} server did not exit ${timeoutMs} ms after SIGTERM: ${output}`));
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

/** Resolves once `<url><ready>` answers (30 s at most); throws with the server's output if it exits first. */
export async function waitHealthy(
  url: string,
  name: string,
  output: () => string,
  exited: () => boolean,
  kill: () => void,
  ready = "/_queue/health",
): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited()) throw new Error(`The ${name} server exited: ${output()}`);
    const ok = await fetch(`${url}${ready}`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    if (Date.now() > deadline) {
      kill();
      throw new Error(`The ${name} server did not answer in 30 s: ${output()}`);
    }
    await sleep(100);
  }
}

/** Lock files left in a data dir (recursively). */
export function lockFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".lock"));
}
