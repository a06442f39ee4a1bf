/**
 * A local redis-server for the baselines: its own port and temp dir, AOF with `appendfsync
 * everysec` (as v-queue's "interval" durability), no RDB snapshots. Rejects with a short reason
 * when redis-server is missing or does not start, so a bench can say why it skipped Redis.
 */
import { spawn } from "node:child_process";
import type { default as Redis } from "ioredis";
import { freePort, removeDir, tempDir } from "./util";

export interface RedisServer {
  port: number;
  /** A new connected ioredis client; each is disconnected by `stop`. */
  connect(): Promise<Redis>;
  stop(): Promise<void>;
}

export async function startRedisServer(): Promise<RedisServer> {
  const { default: RedisClient } = await import("ioredis");
  const port = await freePort();
  const dir = tempDir("redis");
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--appendfsync", "everysec", "--dir", dir],
    { stdio: "ignore" },
  );
  const exited = new Promise<never>((_, reject) => {
    child.once("error", (error) => reject(new Error(`cannot start redis-server (${error.message})`)));
    child.once("exit", (code) => reject(new Error(`redis-server exited (${code})`)));
  });
  exited.catch(() => {});
  const clients: Redis[] = [];
  const stop = async () => {
    for (const c of clients) c.disconnect();
    child.kill("SIGKILL");
    await new Promise((r) => (child.exitCode === null && child.signalCode === null ? child.once("exit", r) : r(undefined)));
    removeDir(dir);
  };
  const connect = async () => {
    const client = new RedisClient({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    // Connection errors surface through the awaited calls; without a listener ioredis also prints them.
    client.on("error", () => {});
    clients.push(client);
    await client.connect();
    return client;
  };
  try {
    await Promise.race([exited, waitFor(() => connect().then(() => {}), 5000)]);
  } catch (error) {
    await stop();
    throw error;
  }
  return { port, connect, stop };
}

async function waitFor(fn: () => Promise<void>, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}
