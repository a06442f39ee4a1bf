/**
 * Nitro's `node-cluster` preset: N worker processes on ONE data directory, requests spread over
 * them by the cluster (one connection each here, so that they do spread). A partitioned queue,
 * declared by the module's `queues` option, is produced to and consumed from every worker: over
 * HTTP and by server code (`useVQueue().produce` with a partition key, `useVQueue().worker` from a plugin). Builds a copy of
 * playground/nitro with that preset in a temporary directory (its node_modules linked).
 * Slow: a Nitro build. Needs `npm run build` (dist/).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { Agent } from "node:http";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockFiles } from "./_host";
import { buildClusterApp, call, PREFIX, startCluster, type RunningCluster } from "./_node-cluster";
import { sleep } from "../helpers/sleep";

const WORKERS = 3;
const PARTITIONS = 4;
const KEYS = 8;

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

/** Server code consuming the partitioned queue: a worker started by a plugin in each cluster worker; what it took, by `GET /taken`. */
const WORKER_PLUGIN = `import { defineNitroPlugin } from "nitro/runtime";
import { useVQueue } from "v-queue/nitro";
export default defineNitroPlugin(() => {
  const taken = ((globalThis as { taken?: string[] }).taken = []);
  useVQueue().worker("events", "server", (m) => void taken.push(m.data as string), { pollTimeoutMs: 200 });
});
`;
const TAKEN_ROUTE = `import { defineHandler } from "nitro/h3";
export default defineHandler(() => ({ pid: process.pid, taken: (globalThis as { taken?: string[] }).taken ?? [] }));
`;

describe(`Nitro node-cluster: ${WORKERS} workers on one directory, a partitioned queue`, () => {
  const data = mkdtempSync(join(tmpdir(), "vq-cluster-data-"));
  let app = "";
  let cluster: RunningCluster | undefined;
  let url = "";

  beforeAll(async () => {
    app = await buildClusterApp(
      { queues: { events: { partitions: PARTITIONS } } },
      { "produce.post.ts": PRODUCE_ROUTE, "taken.get.ts": TAKEN_ROUTE },
      { "worker.ts": WORKER_PLUGIN },
    );
    cluster = await startCluster(app, WORKERS, { NITRO_V_QUEUE_DEFAULT_DIR: data });
    url = cluster.url;
  }, 600_000);

  afterAll(() => {
    cluster?.kill();
    if (app) rmSync(app, { recursive: true, force: true });
    rmSync(data, { recursive: true, force: true });
  });

  it("produces and consumes on every worker; each key in order; stops with its process group, no lock left", { timeout: 120_000 }, async () => {
    // Every worker answers (the first one answered /health; the others start meanwhile, slowly on a loaded machine).
    const pids = new Set<number>();
    for (const until = Date.now() + 60_000; pids.size < WORKERS && Date.now() < until;) pids.add(((await call(`${url}/worker`)).body as { pid: number }).pid);
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
        const res = byServerCode
          ? await call(`${url}/produce`, "POST", { key, message })
          : await call(`${url}${PREFIX}/api/v1/queues/events/messages?partitionKey=${key}`, "POST", { message });
        if (res.status === 200 || res.status === 201) {
          if (byServerCode) producedBy.add((res.body as { pid: number }).pid);
          break;
        }
        if (byServerCode) refusals.push(`${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
        if (attempt > 20 || (res.status !== 409 && res.status < 500)) throw new Error(`produce ${message}: ${res.status} ${JSON.stringify(res.body)}`);
        await sleep(50);
      }
      expected.push(message);
    }
    expect(
      producedBy.size,
      `workers ${[...pids].join(",")} produced: ${[...producedBy].join(",")}; refusals (${refusals.length}, last 5): ${refusals.slice(-5).join(" | ")}`,
    ).toBe(WORKERS);

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
        const consumed = await call(
          `${url}${PREFIX}/api/v1/queues/events/consumers/ord/messages?max_messages=50&timeout_ms=200${commit}`,
          "GET",
          undefined,
          agent,
        );
        if (consumed.status === 200) {
          const body = consumed.body as { cursor: string | null; messages: { data: string }[] };
          for (const m of body.messages) {
            const [key, number] = m.data.split(":");
            ordered.set(key!, [...(ordered.get(key!) ?? []), Number(number)]);
          }
          cursor = body.cursor ?? cursor;
        } else cursor = null; // handed over meanwhile: those come again
        const leased = await call(`${url}${PREFIX}/api/v1/queues/events/consumers/work/lease`, "POST", { max: 50, timeoutMs: 200 }, agent);
        lastLease = `${leased.status} ${JSON.stringify(leased.body).slice(0, 300)}`;
        const messages = leased.status === 200 ? (leased.body as { messages: { data: string; lease: string }[] }).messages : [];
        if (messages.length === 0) continue;
        const acked = await call(`${url}${PREFIX}/api/v1/queues/events/consumers/work/ack`, "POST", { leases: messages.map((m) => m.lease) }, agent);
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

    // Server code's worker (useVQueue().worker from a plugin, in each cluster worker) took every message once, between them.
    const takenBy = new Map<number, string[]>();
    const total = () => [...takenBy.values()].reduce((n, list) => n + list.length, 0);
    for (const until = Date.now() + 60_000; (takenBy.size < WORKERS || total() < expected.length) && Date.now() < until;) {
      const { pid, taken } = (await call(`${url}/taken`)).body as { pid: number; taken: string[] };
      takenBy.set(pid, taken);
    }
    expect([...takenBy.values()].flat().sort()).toEqual([...expected].sort());

    // The queue is listed once, with its partitions.
    const listed = await call(`${url}${PREFIX}/api/v1/queues`);
    expect((listed.body as { queues: string[] }).queues).toEqual(["events"]);

    process.kill(-cluster!.primary.pid!, "SIGTERM");
    const code = await new Promise((r) => cluster!.primary.once("exit", r));
    expect(code).toBe(0);
    expect(lockFiles(data)).toEqual([]);
  });
});
