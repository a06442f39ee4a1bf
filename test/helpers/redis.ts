import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { describe, it } from "vitest";
import { freePort } from "./net";
import { sleep } from "./sleep";

/**
 * A throw-away `redis-server` (Debian's `redis-server` package) for tests and benches: on a
 * free loopback port, in a temp dir, with AOF on and RDB snapshots off, so a restart on the
 * same dir brings the data back.
 */
export interface RedisServer {
  port: number;
  url: string;
  dir: string;
  /** Stops the server (SIGTERM: redis flushes the AOF) and starts it again on the same port and dir. */
  restart(): Promise<void>;
  /** Stops the server and removes its dir. */
  stop(): Promise<void>;
}

/** Whether `redis-server` is on PATH. */
export function hasRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

/**
 * Whether the Redis tests of `suite` can run: `.ci/run` installs Debian's redis-server, so in
 * CI a missing binary is a failing test (registered here), elsewhere a skip.
 */
export function redisTestsRun(suite: string): boolean {
  const available = hasRedisServer();
  if (!available && process.env.CI) {
    describe(suite, () => {
      it("needs redis-server on PATH", () => {
        throw new Error("redis-server is not on PATH: install it (Debian: apt-get install -y redis-server) to run the Redis tests.");
      });
    });
  }
  return available;
}

export async function startRedisServer(): Promise<RedisServer> {
  const dir = await mkdtemp(join(tmpdir(), "vq-redis-"));
  const port = await freePort();
  let child = await launchRedis(port, dir);
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    dir,
    async restart() {
      await terminate(child);
      child = await launchRedis(port, dir);
    },
    async stop() {
      await terminate(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

// --- Internal helpers ---

/** Starts `redis-server` on `port` in `dir` (AOF on, RDB off, loopback only) and waits for its PONG; `extra` arguments go last. */
export async function launchRedis(port: number, dir: string, extra: string[] = []): Promise<ChildProcess> {
  return spawnRedis(port, [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "yes",
    "--dir",
    dir,
    "--protected-mode",
    "yes",
    ...extra,
  ]);
}

/** Runs `redis-server args` (a server, or a sentinel: `<conf> --sentinel`) and waits until it answers PING on `port`. */
export async function spawnRedis(port: number, args: string[]): Promise<ChildProcess> {
  const child = spawn("redis-server", args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(new Error(`Cannot start redis-server: ${error.message}`)));
    child.once("exit", (code) => reject(new Error(`redis-server exited (code ${code}) before answering PING:\n${output}`)));
  });
  failed.catch(() => {});
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (await Promise.race([ping(port), failed])) return child;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`redis-server did not answer PING on port ${port} within 10 s:\n${output}`);
    }
    await sleep(50);
  }
}

/** SIGTERM (redis flushes its AOF; SIGKILL for a crash, or to not wait) and waits for the exit. */
export async function terminate(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill(signal);
  await exited;
}

export function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      reply += chunk.toString();
      // "-LOADING" while the AOF is replayed: not ready yet.
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}
