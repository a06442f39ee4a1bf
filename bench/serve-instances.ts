/**
 * v-queue on many instances for the bench of issue 15: N `v-queue serve` processes (the built CLI,
 * as users run it) on one storage, a partitioned queue declared over HTTP, producers spread over
 * the instances (binary batches, as bench/http.ts), then one ordered consumer loop per instance,
 * all with the same consumer name (the instances share its partitions between them). Each run
 * starts fresh instances on fresh storage (`prepare`), so no run inherits another's state.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Agent } from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { BATCH_CONTENT_TYPE, decodeBatch } from "../protocol/binary";
import { sleep } from "../src/core/sleep";
import type { ConsumeResponse } from "../protocol/api";
import { call, type Reply } from "./http";
import type { Batch, Measured, System, Workload } from "./instances-workload";
import { noRetries, payloadId } from "./instances-workload";
import { cpuMsOf, freePort, progress, removeDir, tempDir } from "./util";

const BIN = fileURLToPath(new URL("../bin/v-queue.mjs", import.meta.url));
/** A consume run that has not seen every message by then has failed (the bench stays bounded). */
const CONSUME_LIMIT_MS = 60_000;
/** Nothing at all delivered by then: consuming a partitioned queue does not work in this build. */
const NOTHING_MS = 5_000;
/** A consume request's long poll: short, as the last one of a run is waited for. */
const POLL_MS = 50;
const QUEUE = "bench";
/**
 * Batches each instance produces and reads back before the clock starts (VQ_BENCH_WARM): with 20,
 * 3 fresh processes spent 4.6-6.2 ms of CPU per 1000 messages consumed against 2.6 for one (each
 * compiles its hot paths anew); with 150, 3.1 against 1.9 over 1,000,000 messages.
 */
export const WARM_BATCHES = Number(process.env.VQ_BENCH_WARM) || 150;

/** The storage of one run: serve's config entries (`dir` or `storage`), and what removes it afterwards. */
export interface RunStorage {
  config: Record<string, unknown>;
  dispose(): Promise<void>;
}

/** The options `v-queue serve` gets here, as bench/http.ts's server: durability "interval", commits not fsynced. */
const SERVE_DEFAULTS = { durability: "interval", syncCommits: false, logLevel: "warn" };

export function vqueueInstances(label: string, instances: number, work: Workload, prepare: (round: number) => Promise<RunStorage>): System {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  /** Once consume failed, later runs measure produce only: a failing consume may take a minute to give up. */
  let consumeFailed: string | undefined;
  return {
    label,
    async run(round, batches) {
      const storage = await prepare(round);
      const servers: Instance[] = [];
      try {
        const started = await Promise.allSettled(Array.from({ length: instances }, () => startInstance(storage)));
        for (const s of started) if (s.status === "fulfilled") servers.push(s.value);
        for (const s of started) if (s.status === "rejected") throw s.reason;
        const ports = servers.map((s) => s.port);
        await declare(agent, ports[0]!, QUEUE, work.partitions);
        await warmUp(agent, ports, work, batches);
        const cpuMs = () => servers.reduce((sum, s) => sum + s.cpuMs(), 0);
        const measured = await measure(agent, ports, work, batches, consumeFailed, cpuMs);
        consumeFailed ??= measured.consumeFailed;
        return measured;
      } finally {
        await Promise.all(servers.map((s) => s.stop()));
        await storage.dispose();
      }
    },
    close: async () => agent.destroy(),
  };
}

async function declare(agent: Agent, port: number, queue: string, partitions: number): Promise<void> {
  const res = await call(agent, port, "PUT", `/api/v1/queues/${queue}`, JSON.stringify({ partitions }), { "content-type": "application/json" });
  if (res.status === 405) throw new Error("not yet measured: this build cannot declare a partitioned queue over HTTP (branch partitions-http not merged)");
  if (res.status !== 201 && res.status !== 200) throw new Error(`declare ${queue} with ${partitions} partitions: ${res.status} ${res.body}`);
}

/**
 * Before the clock: every instance produces WARM_BATCHES batches to a queue of its own kind
 * and reads all of them back with a consumer of its own, so that each process's produce and
 * consume paths are compiled (a fresh process is slow for its first thousands of messages, and
 * N processes pay it N times: not what the bench is about).
 */
async function warmUp(agent: Agent, ports: number[], work: Workload, batches: Batch[]): Promise<void> {
  await declare(agent, ports[0]!, "warm", work.partitions);
  await Promise.all(
    ports.map(async (port) => {
      for (const batch of batches.slice(0, WARM_BATCHES)) {
        const res = await call(agent, port, "POST", "/api/v1/queues/warm/messages", batch.body, { "content-type": BATCH_CONTENT_TYPE });
        if (res.status !== 201) throw new Error(`warm-up produce on port ${port}: ${res.status} ${res.body}`);
      }
    }),
  );
  const total = ports.length * batches.slice(0, WARM_BATCHES).reduce((n, b) => n + b.payloads.length, 0);
  await Promise.all(
    ports.map(async (port, i) => {
      const deadline = performance.now() + 20_000;
      let cursor: string | undefined;
      for (let got = 0; got < total;) {
        if (performance.now() > deadline) throw new Error(`warm-up consume on port ${port}: ${got} of ${total} messages in 20 s`);
        const commit = cursor ? `&commit=${encodeURIComponent(cursor)}` : "";
        const res = await call(
          agent,
          port,
          "GET",
          `/api/v1/queues/warm/consumers/w${i}/messages?max_messages=${work.batch}&timeout_ms=${POLL_MS}${commit}`,
          undefined,
          { accept: BATCH_CONTENT_TYPE },
        );
        if (res.status !== 200) throw new Error(`warm-up consume on port ${port}: ${res.status} ${res.body}`);
        const batch = readBatch(res);
        cursor = batch.cursor;
        got += batch.payloads.length;
      }
    }),
  );
}

async function measure(
  agent: Agent,
  ports: number[],
  work: Workload,
  batches: Batch[],
  consumeFailed: string | undefined,
  cpuMs: () => number,
): Promise<Measured> {
  const retried = noRetries();
  let next = 0;
  const cpu0 = cpuMs();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: work.producers }, async (_, loop) => {
      const port = ports[loop % ports.length]!;
      for (let b = next++; b < batches.length; b = next++) {
        for (;;) {
          const res = await call(agent, port, "POST", `/api/v1/queues/${QUEUE}/messages`, batches[b]!.body, { "content-type": BATCH_CONTENT_TYPE });
          if (res.status === 201) break;
          // A partition being handed over (409) or a fenced write (503): not acknowledged, sent again.
          if (res.status !== 409 && res.status !== 503) throw new Error(`produce on port ${port}: ${res.status} ${res.body}`);
          countRetry(retried.produce, res);
          await sleep(5);
        }
      }
    }),
  );
  const produce = (performance.now() - t0) / 1000;
  const cpu1 = cpuMs();
  const serverCpuMs = { produce: cpu1 - cpu0 };

  if (consumeFailed) return { produce, consumeFailed, duplicates: 0, retried, serverCpuMs };
  try {
    const consumed = await consumeAll(agent, ports, work, retried.consume);
    return { produce, ...consumed, retried, serverCpuMs: { ...serverCpuMs, consume: cpuMs() - cpu1 } };
  } catch (error) {
    // The produce figure stands; the table says why consume has none.
    return { produce, consumeFailed: (error as Error).message.split("\n")[0], duplicates: 0, retried, serverCpuMs };
  }
}

/** One ordered consumer loop per instance, all named "c", until every message was seen. */
async function consumeAll(agent: Agent, ports: number[], work: Workload, retried: Record<string, number>): Promise<Omit<Measured, "produce" | "retried">> {
  const seen = new Uint8Array(work.messages);
  const state = { distinct: 0, duplicates: 0, empty: 0, full: 0 };
  const perInstance = ports.map(() => 0);
  const firstAt = ports.map(() => Number.NaN);
  const t1 = performance.now();
  const deadline = t1 + CONSUME_LIMIT_MS;
  await Promise.all(
    ports.map(async (port, instance) => {
      const base = `/api/v1/queues/${QUEUE}/consumers/c`;
      let cursor: string | undefined;
      while (state.distinct < work.messages) {
        if (state.distinct === 0 && performance.now() > t1 + NOTHING_MS)
          throw new Error(`consume: nothing delivered in ${NOTHING_MS / 1000} s (this build cannot consume a partitioned queue over HTTP?)`);
        if (performance.now() > deadline) throw new Error(`consume: ${state.distinct} of ${work.messages} messages after ${CONSUME_LIMIT_MS / 1000} s`);
        const commit = cursor ? `&commit=${encodeURIComponent(cursor)}` : "";
        const res = await call(agent, port, "GET", `${base}/messages?max_messages=${work.batch}&timeout_ms=${POLL_MS}${commit}`, undefined, {
          accept: BATCH_CONTENT_TYPE,
        });
        if (res.status === 409 || res.status === 503) {
          // E_CURSOR: a partition of the commit was handed over meanwhile; its messages come again
          // from the new holder (counted as redelivered). Read on without that commit.
          if (countRetry(retried, res) === "E_CURSOR") cursor = undefined;
          else await sleep(5);
          continue;
        }
        if (res.status === 404) throw new Error(`not yet measured: this build answers 404 to consuming a partitioned queue over HTTP (${res.body})`);
        if (res.status !== 200) throw new Error(`consume on port ${port}: ${res.status} ${res.body}`);
        const batch = readBatch(res);
        // The request committed the previous cursor: what is left to commit is this batch's.
        cursor = batch.cursor;
        perInstance[instance]! += batch.payloads.length;
        if (batch.payloads.length > 0 && Number.isNaN(firstAt[instance])) firstAt[instance] = performance.now() - t1;
        if (batch.payloads.length === 0) state.empty++;
        else state.full++;
        for (const data of batch.payloads) {
          const id = payloadId(data);
          if (seen[id]!++ === 0) state.distinct++;
          else state.duplicates++;
        }
      }
      // Everything this instance handed out (what a refused commit left out too).
      const last = await call(agent, port, "POST", `${base}/commit`);
      if (last.status !== 200) throw new Error(`commit on port ${port}: ${last.status} ${last.body}`);
    }),
  );
  return {
    consume: (performance.now() - t1) / 1000,
    duplicates: state.duplicates,
    split: perInstance,
    firstMs: firstAt,
    emptyPolls: state.empty,
    fullPolls: state.full,
  };
}

/** Counts a refused request by "<status> <error code>" (the first of each said on stderr); returns the code. */
function countRetry(counts: Record<string, number>, res: Reply): string {
  const code = /"code":"([A-Z_]+)"/.exec(res.body.toString())?.[1] ?? "?";
  const key = `${res.status} ${code}`;
  if (!counts[key]) progress(`  refused, sent again: ${res.status} ${res.body.toString().slice(0, 300)}`);
  counts[key] = (counts[key] ?? 0) + 1;
  return code;
}

/**
 * A consume answer's payloads and cursor: the binary batch (VQP1 for a partitioned queue, cursor
 * in x-vq-cursor) or JSON (a server older than VQP1 answered a partitioned queue in JSON).
 */
function readBatch(res: Reply): { payloads: (string | Uint8Array)[]; cursor: string | undefined } {
  if (String(res.headers["content-type"]).startsWith(BATCH_CONTENT_TYPE)) {
    return { payloads: decodeBatch(res.body, undefined, true).map((r) => r.data), cursor: res.headers["x-vq-cursor"] as string | undefined };
  }
  const body = JSON.parse(res.body.toString()) as ConsumeResponse;
  return { payloads: body.messages.map((m) => (m.encoding === "base64" ? Buffer.from(m.data, "base64") : m.data)), cursor: body.cursor ?? undefined };
}

// --- Instances ---

interface Instance {
  port: number;
  /** The process's user + system CPU time so far, in ms. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/**
 * `v-queue serve` with the run's config and SERVE_DEFAULTS, in its own temp dir so no config
 * file around is picked up.
 */
async function startInstance(storage: RunStorage): Promise<Instance> {
  const home = tempDir("instance");
  const port = await freePort();
  const file = join(home, "vqueue.config.json");
  writeFileSync(file, JSON.stringify({ ...SERVE_DEFAULTS, ...storage.config }));
  const profile = process.env.VQ_BENCH_INSTANCES_PROFILE ? ["--cpu-prof", "--cpu-prof-dir", process.env.VQ_BENCH_INSTANCES_PROFILE] : [];
  const child: ChildProcess = spawn(process.execPath, [...profile, BIN, "serve", "--port", String(port), "--config", file], {
    cwd: home,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
    removeDir(home);
  };
  const agent = new Agent();
  try {
    for (const deadline = Date.now() + 15_000; ; await sleep(50)) {
      if (child.exitCode !== null) throw new Error(`v-queue serve exited with ${child.exitCode}: ${stderr}`);
      if (Date.now() > deadline) throw new Error(`v-queue serve did not answer /health within 15 s: ${stderr}`);
      const res = await call(agent, port, "GET", "/health").catch(() => undefined);
      if (res?.status === 200) break;
    }
  } catch (error) {
    await stop();
    throw error;
  } finally {
    agent.destroy();
  }
  return { port, cpuMs: () => cpuMsOf(child.pid!), stop };
}
