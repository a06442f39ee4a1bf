import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { createServer } from "node:net";
import { freePort } from "./net";
import { launchRedis, terminate } from "./redis";
import { sleep } from "./sleep";

/**
 * A real Redis Cluster on loopback for tests and benches: `masters` masters with one replica
 * each (six `redis-server` processes by default), made by `redis-cli --cluster create`, each
 * node with AOF on in its own temp dir. A short `cluster-node-timeout` lets a replica take
 * over within a few seconds of its master's death.
 */
export interface RedisClusterNode {
  port: number;
  dir: string;
  /** The process now, or undefined while killed. */
  child: ChildProcess | undefined;
}

export interface RedisCluster {
  nodes: RedisClusterNode[];
  /** `[{ host, port }]` of every node, as ioredis's `Cluster` takes them. */
  startupNodes: { host: string; port: number }[];
  /** The ports of the nodes that are masters now (asked of the cluster). */
  masters(): Promise<number[]>;
  /** SIGKILLs a node. */
  kill(port: number): void;
  /** Starts a killed node again on its port and dir (it rejoins with its nodes.conf). */
  restart(port: number): Promise<void>;
  /** Waits until every live node says `cluster_state:ok` and every slot is served. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Waits until every live replica's link to its master is up (a replica takes over only once synced). */
  waitSynced(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes their dirs. */
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  /** `cluster-node-timeout`: how long a master may be silent before its replica takes over. @default 2000 */
  nodeTimeoutMs?: number;
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const nodeTimeout = options.nodeTimeoutMs ?? 2000;
  const root = await mkdtemp(join(tmpdir(), "vq-redis-cluster-"));
  const nodes: RedisClusterNode[] = [];
  const launchNode = (node: RedisClusterNode) =>
    launchRedis(node.port, node.dir, [
      "--cluster-enabled",
      "yes",
      "--cluster-config-file",
      "nodes.conf",
      "--cluster-node-timeout",
      String(nodeTimeout),
      "--appendfsync",
      "everysec",
      "--cluster-replica-validity-factor",
      "0",
      "--repl-diskless-sync-delay",
      "0",
    ]);
  try {
    for (let i = 0; i < masters * 2; i++) {
      const node: RedisClusterNode = { port: 0, dir: join(root, `node-${i}`), child: undefined };
      await mkdir(node.dir, { recursive: true });
      // A node also listens on port + 10000 (the cluster bus), which another program (another
      // suite's servers, run at once) may hold: tried again on other ports.
      for (let attempt = 1; ; attempt++) {
        node.port = await freeBusPort();
        try {
          node.child = await launchNode(node);
          break;
        } catch (error) {
          if (attempt >= 5 || !String(error).includes("Address already in use")) throw error;
        }
      }
      nodes.push(node);
    }
    await run("redis-cli", ["--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "1", "--cluster-yes"]);
  } catch (error) {
    for (const node of nodes) node.child?.kill("SIGKILL");
    await rm(root, { recursive: true, force: true });
    throw error;
  }
  const byPort = (port: number) => {
    const node = nodes.find((n) => n.port === port);
    if (!node) throw new Error(`No cluster node on port ${port}`);
    return node;
  };
  const cluster: RedisCluster = {
    nodes,
    startupNodes: nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
    async masters() {
      const out: number[] = [];
      for (const node of nodes) {
        if (!node.child) continue;
        const role = await run("redis-cli", ["-p", String(node.port), "role"]).catch(() => "");
        if (role.split("\n")[0]?.trim() === "master") out.push(node.port);
      }
      return out;
    },
    kill(port) {
      const node = byPort(port);
      node.child?.kill("SIGKILL");
      node.child = undefined;
    },
    async restart(port) {
      const node = byPort(port);
      if (node.child) return;
      node.child = await launchNode(node);
    },
    async waitHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      const live = () => nodes.filter((n) => n.child);
      for (;;) {
        const states = await Promise.all(live().map((n) => run("redis-cli", ["-p", String(n.port), "cluster", "info"]).catch(() => "")));
        const views = await Promise.all(live().map((n) => run("redis-cli", ["-p", String(n.port), "cluster", "nodes"]).catch(() => "")));
        const livePorts = new Set(live().map((n) => n.port));
        // Every node agrees that every slot is served by a master that is alive.
        const served = views.every((view) =>
          view
            .trim()
            .split("\n")
            .map((line) => line.split(" "))
            .filter((f) => f[2]?.includes("master") && f.length > 8)
            .every((f) => !f[2]!.includes("fail") && livePorts.has(Number(f[1]!.split("@")[0]!.split(":")[1]))),
        );
        if (served && states.every((s) => s.includes("cluster_state:ok") && s.includes("cluster_slots_ok:16384"))) return;
        if (Date.now() > deadline) throw new Error(`The Redis Cluster did not become healthy within ${timeoutMs} ms:\n${states.join("\n---\n")}`);
        await sleep(200);
      }
    },
    async waitSynced(timeoutMs = 30_000) {
      for (const node of nodes) {
        if (!node.child) continue;
        const deadline = Date.now() + timeoutMs;
        for (;;) {
          const info = await run("redis-cli", ["-p", String(node.port), "info", "replication"]).catch(() => "");
          if (info.includes("role:master") || info.includes("master_link_status:up")) break;
          if (Date.now() > deadline) throw new Error(`Replica on port ${node.port} did not sync with its master within ${timeoutMs} ms:\n${info}`);
          await sleep(100);
        }
      }
    },
    async stop() {
      // SIGKILL: on SIGTERM a master waits up to 10 s for replicas that are stopping too.
      await Promise.all(
        nodes.map(async (n) => {
          const child = n.child;
          n.child = undefined;
          if (child) await terminate(child, "SIGKILL");
        }),
      );
      await rm(root, { recursive: true, force: true });
    },
  };
  await cluster.waitHealthy();
  await cluster.waitSynced();
  return cluster;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    child.once("error", reject);
    child.once("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} ${args.join(" ")} exited with ${code}:\n${out}`))));
  });
}

/** A free loopback port whose cluster-bus port (+10000) is free too, as far as can be told before binding. */
async function freeBusPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port + 10_000 <= 65_535 && (await isFree(port + 10_000))) return port;
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}
