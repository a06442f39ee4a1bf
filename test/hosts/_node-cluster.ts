/**
 * A copy of playground/nitro built with Nitro's `node-cluster` preset (its node_modules linked),
 * run as a primary with N workers on one port: the app, its start and stop, one-connection
 * requests (the cluster hands each connection to a worker in turn), and its workers as chaos
 * `Instance`s (killed ones are forked again by the primary).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { type Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join } from "pathe";
import { buildApp, ROOT } from "./_host";
import { staleWriterCounts, type Instance } from "../helpers/multi-instance";
import { freePort } from "../helpers/net";
import { sleep } from "../helpers/sleep";

const run = promisify(execFile);

/** The API's prefix in the built app. */
export const PREFIX = "/_queue";

/** Answers which worker it is, and that worker's own /metrics (counters are per process). */
const WORKER_ROUTE = `import { defineHandler } from "nitro/h3";
import { vQueueFetch } from "v-queue/nitro";
export default defineHandler(async () => {
  const metrics = await vQueueFetch("default", new Request("http://localhost${PREFIX}/metrics"));
  return { pid: process.pid, metrics: await metrics.text() };
});
`;

/**
 * Builds the app in a temporary directory: the v-queue module with `moduleOptions` (JSON, the
 * prefix added, auth off unless they say otherwise), `routes` (file under routes/ -> source), `plugins` (under plugins/) and `GET /worker`. Returns its directory.
 */
export async function buildClusterApp(
  moduleOptions: Record<string, unknown>,
  routes: Record<string, string> = {},
  plugins: Record<string, string> = {},
): Promise<string> {
  const app = mkdtempSync(join(tmpdir(), "vq-cluster-app-"));
  // The playground's dependencies (installed by buildApp when missing), linked into a copy with this preset.
  await buildApp({ dir: "nitro", build: ["nitro", "--version"], envPrefix: "NITRO_" });
  symlinkSync(join(ROOT, "playground/nitro/node_modules"), join(app, "node_modules"), "dir");
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "vq-cluster", private: true, type: "module" }));
  writeFileSync(
    join(app, "nitro.config.ts"),
    `import { defineNitroConfig } from "nitro/config";
import vQueue from "v-queue/nitro";

export default defineNitroConfig({
  compatibilityDate: "2025-10-01",
  preset: "node-cluster",
  // Nitro 3.0.0 cannot resolve the preset's runtime chunk without it (docs/storage.md#running-several-instances).
  rollupConfig: { output: { manualChunks: {} } },
  // Without users the API is not served unless auth is off on purpose: these tests call it on loopback.
  modules: [vQueue(${JSON.stringify({ auth: false, ...moduleOptions, prefix: PREFIX })})],
});
`,
  );
  mkdirSync(join(app, "routes"));
  for (const [file, source] of Object.entries({ ...routes, "worker.get.ts": WORKER_ROUTE })) writeFileSync(join(app, "routes", file), source);
  mkdirSync(join(app, "plugins"));
  for (const [file, source] of Object.entries(plugins)) writeFileSync(join(app, "plugins", file), source);
  await run("npx", ["nitro", "build"], { cwd: app, env: { ...process.env, NODE_ENV: "production" }, maxBuffer: 64 << 20 });
  return app;
}

export interface RunningCluster {
  /** The app's base URL. */
  url: string;
  primary: ChildProcess;
  output(): string;
  /** Its workers' PIDs now (children of the primary). */
  workers(): number[];
  /** SIGKILL to the whole process group. */
  kill(): void;
}

/** Starts the built app with `workers` workers (`env` added: the runtime config) and waits until one answers /health. */
export async function startCluster(app: string, workers: number, env: Record<string, string>): Promise<RunningCluster> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // Its own process group: the primary does not pass SIGTERM on to its workers.
  const primary = spawn(process.execPath, [".output/server/index.mjs"], {
    cwd: app,
    detached: true,
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", NITRO_CLUSTER_WORKERS: String(workers), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  primary.stdout!.on("data", (d) => (output += d));
  primary.stderr!.on("data", (d) => (output += d));
  const cluster: RunningCluster = {
    url,
    primary,
    output: () => output,
    workers: () => childrenOf(primary.pid!),
    kill() {
      try {
        process.kill(-primary.pid!, "SIGKILL");
      } catch {
        // the group is gone already
      }
    },
  };
  const deadline = Date.now() + 30_000;
  while (
    !(await call(`${url}${PREFIX}/health`).then(
      (r) => r.status === 200,
      () => false,
    ))
  ) {
    if (primary.exitCode !== null || Date.now() > deadline) {
      cluster.kill(); // its workers too: none is left behind
      throw new Error(`the cluster did not start: ${output}`);
    }
    await sleep(100);
  }
  return cluster;
}

/** The PIDs whose parent is `pid` (read from /proc: Linux). */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "pid (comm) state ppid ...": comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const [state, parent] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(parent) === pid && state !== "Z") children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children.sort((a, b) => a - b);
}

/**
 * One request, on its own connection (no keep-alive: the cluster hands each connection to a
 * worker in turn), or on `agent`'s one kept-alive connection (one worker). Fails after `timeoutMs`.
 */
export function call(
  url: string,
  method = "GET",
  body?: unknown,
  agent: Agent | false = false,
  timeoutMs = 30_000,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, timeout: timeoutMs, headers: body === undefined ? {} : { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, body: text ? (JSON.parse(text) as unknown) : undefined }));
    });
    req.on("timeout", () => req.destroy(new Error(`no answer from ${url} in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/**
 * The cluster's workers as chaos instances, one per worker now running: each is the worker in its
 * slot, and a SIGKILLed one's slot goes to the worker the primary forks in its place. All share
 * the cluster's URL (the cluster picks the worker of each connection); a slot's counters are read
 * from the `/worker` route, asked on new connections until its own worker answers.
 */
export function workerInstances(cluster: RunningCluster): Instance[] {
  const known = new Set(cluster.workers());
  const ask = async (pid: number) => {
    // Round-robin: a few connections reach every live worker (a paused one's time out).
    for (let attempt = 0; attempt < 4 * Math.max(1, cluster.workers().length); attempt++) {
      const res = await call(`${cluster.url}/worker`, "GET", undefined, false, 2000).catch(() => undefined);
      const body = res?.body as { pid: number; metrics: string } | undefined;
      if (body?.pid === pid) return body;
    }
    return undefined;
  };
  return [...known].map((first) => {
    let pid = first;
    const instance: Instance = {
      url: `${cluster.url}${PREFIX}`,
      fencedBefore: { storage: 0, lease: 0 },
      kill(signal) {
        try {
          process.kill(pid, signal);
        } catch {
          // already gone
        }
      },
      async restart() {
        instance.kill("SIGKILL");
        const deadline = Date.now() + 30_000;
        let next: number | undefined;
        while (!(next = cluster.workers().find((p) => !known.has(p)))) {
          if (Date.now() > deadline) throw new Error(`no worker forked after ${pid}'s kill: ${cluster.output()}`);
          await sleep(50);
        }
        known.add(next);
        pid = next;
        // Serving once it answers a request of its own.
        while (!(await ask(pid))) if (Date.now() > deadline) throw new Error(`worker ${pid} does not answer: ${cluster.output()}`);
      },
      fencedWrites: async () => {
        const body = await ask(pid);
        return body ? staleWriterCounts(new Response(body.metrics)) : undefined;
      },
      pid: () => pid,
    };
    return instance;
  });
}
