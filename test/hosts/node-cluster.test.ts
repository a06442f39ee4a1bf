/**
 * Nitro's `node-cluster` preset: N worker processes on ONE data directory, requests spread over
 * them by the cluster (one connection each here, so that they do spread). A partitioned queue,
 * declared by the module's `queues` option, is produced to and consumed from every worker: over
 * HTTP and by server code (`useVQueue().produce` with a partition key). Builds a copy of
 * playground/nitro with that preset in a temporary directory (its node_modules linked).
 * Slow: a Nitro build. Needs `npm run build` (dist/).
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp, lockFiles, ROOT } from "./_host";
import { freePort } from "../helpers/net";

const run = promisify(execFile);
const WORKERS = 3;
const PARTITIONS = 4;
const KEYS = 8;

const CONFIG = `import { defineNitroConfig } from "nitro/config";
import vQueue from "v-queue/nitro";

export default defineNitroConfig({
  compatibilityDate: "2025-10-01",
  preset: "node-cluster",
  // Nitro 3.0.0 cannot resolve the preset's runtime chunk without it (README, "Running several instances").
  rollupConfig: { output: { manualChunks: {} } },
  modules: [vQueue({ prefix: "/_queue", queues: { events: { partitions: ${PARTITIONS} } } })],
});
`;

const PID_ROUTE = `import { defineHandler } from "nitro/h3";
export default defineHandler(() => ({ pid: process.pid }));
`;

/** Server code producing to the partitioned queue: the worker's own writer, by partition key. */
const PRODUCE_ROUTE = `import { defineHandler } from "nitro/h3";
import { useVQueue } from "v-queue/nitro";
export default defineHandler(async (event) => {
  const { key, message } = (await event.req.json()) as { key: string; message: string };
  try {
    const result = await useVQueue().produce("events", [message], { partitionKey: key, key: message });
    return { partition: result.partition, pid: process.pid };
  } catch (error) {
    // Which worker refused, and why: the test says so if a worker never produces.
    const { code, message: why } = error as { code?: string; message: string };
    return new Response(JSON.stringify({ pid: process.pid, code, message: why }), { status: code === "E_LOCKED" ? 409 : 500, headers: { "content-type": "application/json" } });
  }
});
`;

/**
 * One request, on its own connection (no keep-alive: the cluster hands each connection to a
 * worker in turn), or on `agent`'s one kept-alive connection (one worker: a lease's ack or a
 * batch's commit must reach the worker holding its partition).
 */
function call(url: string, method = "GET", body?: unknown, agent: Agent | false = false): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers: body === undefined ? {} : { "content-type": "application/json" } }, (res) => {
      let text = "";
      res.setEncoding("utf8").on("data", (c: string) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, body: text ? (JSON.parse(text) as unknown) : undefined }));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

describe(`Nitro node-cluster: ${WORKERS} workers on one directory, a partitioned queue`, () => {
  const app = mkdtempSync(join(tmpdir(), "vq-cluster-app-"));
  const data = mkdtempSync(join(tmpdir(), "vq-cluster-data-"));
  let server: ChildProcess | undefined;
  let url = "";
  let output = "";

  beforeAll(async () => {
    // The playground's dependencies (installed by buildApp when missing), linked into a copy with this preset.
    await buildApp({ dir: "nitro", build: ["nitro", "--version"], envPrefix: "NITRO_" });
    symlinkSync(join(ROOT, "playground/nitro/node_modules"), join(app, "node_modules"), "dir");
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "vq-cluster", private: true, type: "module" }));
    writeFileSync(join(app, "nitro.config.ts"), CONFIG);
    mkdirSync(join(app, "routes"));
    writeFileSync(join(app, "routes/pid.get.ts"), PID_ROUTE);
    writeFileSync(join(app, "routes/produce.post.ts"), PRODUCE_ROUTE);
    await run("npx", ["nitro", "build"], { cwd: app, env: { ...process.env, NODE_ENV: "production" }, maxBuffer: 64 << 20 });
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    // Its own process group: the primary does not pass SIGTERM on to its workers.
    server = spawn(process.execPath, [".output/server/index.mjs"], {
      cwd: app,
      detached: true,
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", NODE_ENV: "production", NITRO_CLUSTER_WORKERS: String(WORKERS), NITRO_V_QUEUE_DEFAULT_DIR: data },
      stdio: ["ignore", "pipe", "pipe"],
    });
    server.stdout!.on("data", (d) => (output += d));
    server.stderr!.on("data", (d) => (output += d));
    const deadline = Date.now() + 30_000;
    while (!(await call(`${url}/_queue/health`).then((r) => r.status === 200, () => false))) {
      if (server.exitCode !== null || Date.now() > deadline) throw new Error(`the cluster did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 600_000);

  afterAll(() => {
    if (server?.pid && server.exitCode === null) process.kill(-server.pid, "SIGKILL");
    rmSync(app, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it("produces and consumes on every worker; each key in order; stops with its process group, no lock left", { timeout: 120_000 }, async () => {
    // Every worker answers (the first one answered /health; the others start meanwhile, slowly on a loaded machine).
    const pids = new Set<number>();
    for (const until = Date.now() + 60_000; pids.size < WORKERS && Date.now() < until; ) pids.add(((await call(`${url}/pid`)).body as { pid: number }).pid);
    expect(pids.size).toBe(WORKERS);

    // Produced over HTTP and by server code, on whichever worker gets the connection; retried on a hand-over's 409/503.
    const expected: string[] = [];
    const producedBy = new Set<number>();
    const refusals: string[] = [];
    // Over HTTP first, then by server code until every worker's has written (the cluster's turns are not strictly in order).
    for (let n = 0; n < 90 || (producedBy.size < WORKERS && n < 1000); n++) {
      const key = `k${n % KEYS}`;
      const message = `${key}:${Math.floor(n / KEYS)}`;
      const byServerCode = n >= 90;
      for (let attempt = 0; ; attempt++) {
        const res = byServerCode ? await call(`${url}/produce`, "POST", { key, message }) : await call(`${url}/_queue/api/v1/queues/events/messages?partitionKey=${key}`, "POST", { message });
        if (res.status === 200 || res.status === 201) {
          if (byServerCode) producedBy.add((res.body as { pid: number }).pid);
          break;
        }
        if (byServerCode) refusals.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        if (attempt > 20 || (res.status !== 409 && res.status < 500)) throw new Error(`produce ${message}: ${res.status} ${JSON.stringify(res.body)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      expected.push(message);
    }
    expect(producedBy.size, `workers ${[...pids].join(",")} produced: ${[...producedBy].join(",")}; refusals (${refusals.length}, last 5): ${refusals.slice(-5).join(" | ")}`).toBe(WORKERS);

    // Consumed from every worker: clients with a kept-alive connection each (so, each on one worker), an
    // ordered consumer committing each batch with the next consume, and a shared one acking.
    const ordered = new Map<string, number[]>();
    const shared = new Set<string>();
    const deadline = Date.now() + 60_000;
    let lastLease = "";
    const seen = () => [...ordered.values()].reduce((n, list) => n + new Set(list).size, 0);
    const done = () => seen() >= expected.length && shared.size >= expected.length;
    const consumer = async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      let cursor: string | null = null;
      while (!done() && Date.now() < deadline) {
        const commit = cursor ? `&commit=${encodeURIComponent(cursor)}` : "";
        const consumed = await call(`${url}/_queue/api/v1/queues/events/consumers/ord/messages?max_messages=50&timeout_ms=200${commit}`, "GET", undefined, agent);
        if (consumed.status === 200) {
          const body = consumed.body as { cursor: string | null; messages: { data: string }[] };
          for (const m of body.messages) {
            const [key, number] = m.data.split(":");
            ordered.set(key!, [...(ordered.get(key!) ?? []), Number(number)]);
          }
          cursor = body.cursor ?? cursor;
        } else cursor = null; // handed over meanwhile: those come again
        const leased = await call(`${url}/_queue/api/v1/queues/events/consumers/work/lease`, "POST", { max: 50, timeoutMs: 200 }, agent);
        lastLease = `${leased.status} ${JSON.stringify(leased.body).slice(0, 300)}`;
        const messages = leased.status === 200 ? (leased.body as { messages: { data: string; lease: string }[] }).messages : [];
        if (messages.length === 0) continue;
        const acked = await call(`${url}/_queue/api/v1/queues/events/consumers/work/ack`, "POST", { leases: messages.map((m) => m.lease) }, agent);
        const refused = new Set(((acked.body as { errors?: { lease: string }[] }).errors ?? []).map((e) => e.lease));
        if (acked.status === 200) for (const m of messages) if (!refused.has(m.lease)) shared.add(m.data);
      }
      agent.destroy();
    };
    await Promise.all(Array.from({ length: WORKERS * 2 }, consumer));
    expect(seen()).toBe(expected.length);
    expect([...shared].sort(), lastLease).toEqual([...expected].sort());
    for (const [key, numbers] of ordered) {
      let highest = -1;
      for (const n of numbers) if (n > highest) expect(n, `${key}: ${numbers.join(",")}`).toBe((highest = highest + 1));
    }

    // The queue is listed once, with its partitions.
    const listed = await call(`${url}/_queue/api/v1/queues`);
    expect((listed.body as { queues: string[] }).queues).toEqual(["events"]);

    process.kill(-server!.pid!, "SIGTERM");
    const code = await new Promise((r) => server!.once("exit", r));
    expect(code).toBe(0);
    expect(lockFiles(data)).toEqual([]);
  });
});
