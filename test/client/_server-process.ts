import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "pathe";
import { freePort } from "../helpers/net";
import { scriptCommand } from "../helpers/runtime";
import { sleep } from "../helpers/sleep";

export { freePort };

const CLI = resolve(import.meta.dirname, "../../adapters/cli.ts");

/** A free loopback port (asked of the OS, then released). */

export interface ServerProcess {
  url: string;
  port: number;
  dir: string;
  /** Its config file, read again at each start (`restart`). */
  configFile: string;
  /** Stops the process (SIGTERM: graceful; SIGKILL: a crash). */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and data directory, `downMs` after it stopped. */
  restart(signal?: NodeJS.Signals, downMs?: number): Promise<void>;
  remove(): Promise<void>;
}

/** The standalone server (`v-queue serve`) in its own process of the current runtime, on a free loopback port. */
export async function startServerProcess(config: Record<string, unknown> = {}): Promise<ServerProcess> {
  const root = mkdtempSync(join(tmpdir(), "vq-client-"));
  const dir = join(root, "data");
  const configFile = join(root, "vqueue.config.json");
  writeFileSync(configFile, JSON.stringify({ durability: "none", syncCommits: true, ...config }));
  const port = await freePort();
  let child: ChildProcess | undefined;

  const start = async () => {
    const { command, args } = scriptCommand(CLI, ["serve", "--dir", dir, "--port", String(port), "--config", configFile, "--log-level", "warn"]);
    child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, NODE_ENV: "test" },
    });
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    child.stderr!.on("data", (d) => (output += d));
    // Not a bound on how fast it starts: a safety net (a loaded machine took over 20 s to start the CLI from source).
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`server exited: ${output}`);
      const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      if (Date.now() > deadline) {
        // Nobody holds it yet (the caller gets no handle to stop): it would outlive the run.
        child.kill("SIGKILL");
        throw new Error(`server did not start: ${output}`);
      }
      await sleep(50);
    }
  };
  const stop = async (signal: NodeJS.Signals = "SIGTERM") => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child!.once("exit", r));
    child.kill(signal);
    await exited;
  };
  await start();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dir,
    configFile,
    stop,
    async restart(signal, downMs = 0) {
      await stop(signal);
      if (downMs > 0) await sleep(downMs);
      await start();
    },
    async remove() {
      await stop("SIGKILL");
      rmSync(root, { recursive: true, force: true });
    },
  };
}
