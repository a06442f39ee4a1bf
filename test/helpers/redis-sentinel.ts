import type { ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import Redis from "ioredis";
import { join } from "pathe";
import { freePort } from "./net";
import { launchRedis, spawnRedis, terminate } from "./redis";
import { sleep } from "./sleep";

/**
 * A real Redis Sentinel set on loopback for tests: a master, one replica and three sentinels
 * (`redis-server <conf> --sentinel`: Debian's `redis-server` binary, no `redis-sentinel`
 * package needed), each in its own temp dir, data nodes with AOF on. Sentinels declare the
 * master down after `downAfterMs` of silence and need two of three to agree (quorum 2), so a
 * killed master's replica is promoted within a few seconds.
 */
export interface RedisSentinelNode {
  port: number;
  dir: string;
  /** The process now, or undefined while killed. */
  child: ChildProcess | undefined;
}

export interface RedisSentinelSet {
  /** The monitored master's name (ioredis's `name`). */
  name: string;
  /** `[{ host, port }]` of the three sentinels, as ioredis's `sentinels` takes them. */
  sentinels: { host: string; port: number }[];
  /** The two data nodes; the first starts as the master. */
  nodes: RedisSentinelNode[];
  /** The port of the master the sentinels name now (asked of the first sentinel that answers). */
  master(): Promise<number>;
  /**
   * Kills the master (SIGKILL), waits until the sentinels name its replica and that node says
   * it is a master, restarts the old master on its port and dir (the sentinels turn it into a
   * replica of the new one) and waits until it is synced. Returns the old and new masters' ports.
   */
  failover(timeoutMs?: number): Promise<{ from: number; to: number; promotedMs: number }>;
  /** Waits until every live data node but the master is its synced replica and every sentinel knows the replica and the two other sentinels. */
  waitSynced(timeoutMs?: number): Promise<void>;
  /** Stops every process and removes the dirs. */
  stop(): Promise<void>;
}

export interface RedisSentinelOptions {
  /** `sentinel down-after-milliseconds`: silence before a master is thought down. @default 1000 */
  downAfterMs?: number;
  /** `sentinel failover-timeout`. @default 2000 */
  failoverTimeoutMs?: number;
}

const NAME = "vqmaster";

export async function startRedisSentinel(options: RedisSentinelOptions = {}): Promise<RedisSentinelSet> {
  const root = await mkdtemp(join(tmpdir(), "vq-redis-sentinel-"));
  const nodes: RedisSentinelNode[] = [];
  const sentinelChildren: ChildProcess[] = [];
  const sentinels: { host: string; port: number }[] = [];
  // No 5 s pause before a full sync (a rejoining node resyncs at once).
  const launchNode = (node: RedisSentinelNode, extra: string[] = []) =>
    launchRedis(node.port, node.dir, ["--appendfsync", "everysec", "--repl-diskless-sync-delay", "0", ...extra]);
  const stopAll = async () => {
    await Promise.all([...nodes.map((n) => n.child), ...sentinelChildren].map((child) => child && terminate(child, "SIGKILL")));
    for (const n of nodes) n.child = undefined;
    await rm(root, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 2; i++) {
      const node: RedisSentinelNode = { port: await freePort(), dir: join(root, `node-${i}`), child: undefined };
      await mkdir(node.dir, { recursive: true });
      node.child = await launchNode(node, i === 0 ? [] : ["--replicaof", "127.0.0.1", String(nodes[0]!.port)]);
      nodes.push(node);
    }
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const dir = join(root, `sentinel-${i}`);
      await mkdir(dir, { recursive: true });
      // Sentinel rewrites its config file (what it learnt): it must be writable.
      const conf = join(dir, "sentinel.conf");
      await writeFile(
        conf,
        [
          `port ${port}`,
          "bind 127.0.0.1",
          `dir ${dir}`,
          `sentinel monitor ${NAME} 127.0.0.1 ${nodes[0]!.port} 2`,
          `sentinel down-after-milliseconds ${NAME} ${options.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${NAME} ${options.failoverTimeoutMs ?? 2000}`,
          "",
        ].join("\n"),
      );
      sentinelChildren.push(await spawnRedis(port, [conf, "--sentinel"]));
      sentinels.push({ host: "127.0.0.1", port });
    }
  } catch (error) {
    await stopAll();
    throw error;
  }

  const master = async () => {
    for (const s of sentinels) {
      const addr = (await ask(s.port, "SENTINEL", "get-master-addr-by-name", NAME)) as string[] | undefined;
      if (addr) return Number(addr[1]);
    }
    throw new Error("No sentinel answered get-master-addr-by-name");
  };
  const waitUntil = async (what: string, timeoutMs: number, check: () => Promise<string | undefined>) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missing = await check();
      if (missing === undefined) return;
      if (Date.now() > deadline) throw new Error(`Redis Sentinel: ${what} within ${timeoutMs} ms: ${missing}`);
      await sleep(100);
    }
  };
  const set: RedisSentinelSet = {
    name: NAME,
    sentinels,
    nodes,
    master,
    async waitSynced(timeoutMs = 20_000) {
      await waitUntil("the replica did not sync and the sentinels did not see each other", timeoutMs, async () => {
        const now = await master();
        for (const node of nodes) {
          if (!node.child || node.port === now) continue;
          const info = String((await ask(node.port, "INFO", "replication")) ?? "");
          if (!info.includes(`master_port:${now}`) || !info.includes("master_link_status:up"))
            return `node ${node.port}: ${info.replace(/\s+/g, " ").slice(0, 200)}`;
        }
        for (const s of sentinels) {
          const fields = toMap((await ask(s.port, "SENTINEL", "master", NAME)) as string[] | undefined);
          if (fields.get("num-other-sentinels") !== "2") return `sentinel ${s.port} knows ${fields.get("num-other-sentinels")} other sentinels`;
          const replicas = ((await ask(s.port, "SENTINEL", "replicas", NAME)) as string[][] | undefined) ?? [];
          const good = replicas
            .map(toMap)
            .filter((r) => !/s_down|disconnected/.test(r.get("flags") ?? ""))
            .map((r) => Number(r.get("port")));
          for (const node of nodes)
            if (node.child && node.port !== now && !good.includes(node.port)) return `sentinel ${s.port} does not see replica ${node.port}`;
        }
        return undefined;
      });
    },
    async failover(timeoutMs = 30_000) {
      const from = await master();
      const old = nodes.find((n) => n.port === from)!;
      const killedAt = Date.now();
      await terminate(old.child!, "SIGKILL");
      old.child = undefined;
      let to = from;
      await waitUntil("no replica was promoted", timeoutMs, async () => {
        to = await master();
        if (to === from) return `the sentinels still name ${from}`;
        const role = (await ask(to, "ROLE")) as unknown[] | undefined;
        return role?.[0] === "master" ? undefined : `${to} says ${role?.[0]}`;
      });
      const promotedMs = Date.now() - killedAt;
      // Back as it was started (a master, with its AOF): the sentinels reconfigure it as a replica.
      old.child = await launchNode(old);
      await set.waitSynced(timeoutMs);
      return { from, to, promotedMs };
    },
    stop: stopAll,
  };
  await set.waitSynced();
  return set;
}

// --- Internal helpers ---

/** One command to the node or sentinel on `port`, or undefined when it does not answer. */
async function ask(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ port, host: "127.0.0.1", lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1000 });
  client.on("error", () => {});
  try {
    await client.connect();
    return await client.call(args[0]!, ...args.slice(1));
  } catch {
    return undefined;
  } finally {
    client.disconnect();
  }
}

/** A Redis flat field list (`[k1, v1, k2, v2, ...]`) as a Map. */
function toMap(list: string[] | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; list && i + 1 < list.length; i += 2) map.set(list[i]!, list[i + 1]!);
  return map;
}
