/**
 * Several `v-queue serve` processes (the built CLI) on ONE data directory, a partitioned queue
 * shared by all of them, while one instance after another is SIGKILLed and restarted or
 * SIGSTOPped for a second: every message answered 2xx is consumed (ordered: each key in order,
 * at least once; shared: at least once), no record fails its CRC, and the lags reach 0.
 * ~30 s (CI); `VQ_SOAK=1` runs 2 minutes. Needs `npm run build` (dist/).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import fsDriver from "../adapters/drivers/fs";
import { browseMessages } from "../src/browse";
import type { QueueProblem } from "../src/errors";
import { inspectQueue } from "../src/inspect";
import { partitionName } from "../src/partitions";
import { BIN } from "./cli/_cli";
import { freePort } from "./helpers/net";

const SOAK = process.env.VQ_SOAK === "1";
const RUN_MS = SOAK ? 120_000 : 30_000;
const INSTANCES = 3;
const PARTITIONS = 6;
const QUEUE = "events";
/** Producer loops per instance, each with its own keys (a key's messages are produced one after another: their order is known). */
const PRODUCERS = 2;
const KEYS_PER_PRODUCER = 4;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Instance {
  url: string;
  child?: ChildProcess;
  start(): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

const root = mkdtempSync(join(tmpdir(), "vq-multi-"));
const dir = join(root, "data");
const instances: Instance[] = [];

afterAll(() => {
  for (const instance of instances) instance.kill("SIGKILL");
  rmSync(root, { recursive: true, force: true });
});

async function startInstance(config: string): Promise<Instance> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const instance: Instance = {
    url,
    async start() {
      const child = spawn(process.execPath, [BIN, "serve", "--dir", dir, "--port", String(port), "--config", config, "--log-level", "error"], { stdio: ["ignore", "ignore", "pipe"] });
      let output = "";
      child.stderr!.on("data", (d) => (output += d));
      instance.child = child;
      const deadline = Date.now() + 20_000;
      for (;;) {
        if (child.exitCode !== null) throw new Error(`instance exited: ${output}`);
        if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) return;
        if (Date.now() > deadline) throw new Error(`instance did not start: ${output}`);
        await sleep(50);
      }
    },
    kill(signal) {
      if (instance.child && instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill(signal);
    },
  };
  await instance.start();
  return instance;
}

/** A request that may meet a dead or paused instance: undefined on a network error or timeout. */
async function call(url: string, init: RequestInit = {}, timeoutMs = 5000): Promise<Response | undefined> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
  } catch {
    return undefined;
  }
}

describe("several instances on one directory, a partitioned queue", () => {
  it(`every acknowledged message is consumed through kills and pauses (${RUN_MS / 1000} s)`, { timeout: RUN_MS + 120_000 }, async () => {
    const config = join(root, "vqueue.config.json");
    writeFileSync(config, JSON.stringify({ durability: "none", queues: { [QUEUE]: { partitions: PARTITIONS } }, shared: { leaseMs: 5000 } }));
    for (let i = 0; i < INSTANCES; i++) instances.push(await startInstance(config));

    let producing = true;
    let consuming = true;
    /** Every message answered 2xx: key -> its numbers in produce order. */
    const acked = new Map<string, number[]>();
    /** Each ordered consume, per key, the numbers in the order they came (duplicates included). */
    const ordered = new Map<string, number[]>();
    const shared = new Set<string>();
    let retries = 0;
    let orderedErrors = 0;

    const producer = async (instance: number, loop: number) => {
      const keys = Array.from({ length: KEYS_PER_PRODUCER }, (_, k) => `i${instance}-l${loop}-k${k}`);
      for (let n = 0; producing; n++) {
        const key = keys[n % keys.length]!;
        const number = Math.floor(n / keys.length);
        const body = JSON.stringify({ message: `${key}:${number}` });
        // Retried until answered 2xx, with the same idempotency key, on whichever instance is up.
        for (let attempt = 0; ; attempt++) {
          const target = instances[(instance + attempt) % INSTANCES]!;
          const res = await call(`${target.url}/api/v1/queues/${QUEUE}/messages`, { method: "POST", body, headers: { "content-type": "application/json", "partition-key": key, "idempotency-key": `${key}:${number}` } });
          if (res?.ok) {
            await res.arrayBuffer();
            break;
          }
          if (res && res.status < 500 && res.status !== 409) throw new Error(`produce answered ${res.status}: ${await res.text()}`);
          await res?.arrayBuffer();
          retries++;
          await sleep(20 + Math.random() * 50);
        }
        let list = acked.get(key);
        if (!list) acked.set(key, (list = []));
        list.push(number);
      }
    };

    const orderedConsumer = async (instance: number) => {
      while (consuming) {
        const url = instances[instance]!.url;
        const res = await call(`${url}/api/v1/queues/${QUEUE}/consumers/ord/messages?max_messages=200&timeout_ms=500`, {}, 3000);
        if (!res?.ok) {
          await res?.arrayBuffer();
          orderedErrors++;
          await sleep(50);
          continue;
        }
        const body = (await res.json()) as { cursor: string | null; messages: { data: string; partition: number }[] };
        for (const m of body.messages) {
          const [key, number] = m.data.split(":");
          let list = ordered.get(key!);
          if (!list) ordered.set(key!, (list = []));
          list.push(Number(number));
        }
        if (body.cursor) await call(`${url}/api/v1/queues/${QUEUE}/consumers/ord/commit`, { method: "POST", body: JSON.stringify({ cursor: body.cursor }), headers: { "content-type": "application/json" } }, 3000).then((r) => r?.arrayBuffer());
      }
    };

    const sharedConsumer = async (instance: number) => {
      while (consuming) {
        const url = instances[instance]!.url;
        const res = await call(`${url}/api/v1/queues/${QUEUE}/consumers/work/lease`, { method: "POST", body: JSON.stringify({ max: 100, timeoutMs: 500 }), headers: { "content-type": "application/json" } }, 3000);
        if (!res?.ok) {
          await res?.arrayBuffer();
          await sleep(50);
          continue;
        }
        const body = (await res.json()) as { messages: { data: string; lease: string }[] };
        if (body.messages.length === 0) continue;
        const ack = await call(`${url}/api/v1/queues/${QUEUE}/consumers/work/ack`, { method: "POST", body: JSON.stringify({ leases: body.messages.map((m) => m.lease) }), headers: { "content-type": "application/json" } }, 3000);
        // Acknowledged (an error item is a lease that ran out: it comes again); unanswered: it comes again.
        if (!ack?.ok) continue;
        const { errors } = (await ack.json()) as { errors: { lease: string }[] };
        const refused = new Set(errors.map((e) => e.lease));
        for (const m of body.messages) if (!refused.has(m.lease)) shared.add(m.data);
      }
    };

    let kills = 0;
    let pauses = 0;
    const chaos = async () => {
      const end = Date.now() + RUN_MS;
      for (let round = 0; Date.now() < end; round++) {
        await sleep(2000);
        const instance = instances[round % INSTANCES]!;
        if (round % 3 === 2) {
          instance.kill("SIGSTOP");
          pauses++;
          await sleep(1000);
          instance.kill("SIGCONT");
        } else {
          instance.kill("SIGKILL");
          kills++;
          await new Promise((r) => instance.child!.once("exit", r));
          await instance.start();
        }
      }
    };

    const producers = instances.flatMap((_, i) => Array.from({ length: PRODUCERS }, (_, l) => producer(i, l)));
    const consumers = instances.flatMap((_, i) => [orderedConsumer(i), sharedConsumer(i)]);
    await chaos();
    producing = false;
    await Promise.all(producers);

    // Everything acknowledged reaches both consumers (lingering leases run out, hand-overs settle).
    const expected = [...acked].flatMap(([key, numbers]) => numbers.map((n) => `${key}:${n}`));
    const deadline = Date.now() + 60_000;
    const missingOrdered = () => expected.filter((m) => !ordered.get(m.split(":")[0]!)?.includes(Number(m.split(":")[1])));
    const missingShared = () => expected.filter((m) => !shared.has(m));
    while ((missingOrdered().length > 0 || missingShared().length > 0) && Date.now() < deadline) await sleep(250);
    // And the lags reach 0 (the commits of the last batches land).
    const driver = fsDriver({ dir });
    const lags = async () => {
      let total = 0;
      for (let p = 0; p < PARTITIONS; p++) {
        const stats = await inspectQueue(driver, partitionName(QUEUE, p));
        total += stats?.consumers.reduce((sum, c) => sum + c.lag, 0) ?? 0;
      }
      return total;
    };
    while ((await lags()) > 0 && Date.now() < deadline) await sleep(250);
    consuming = false;
    await Promise.all(consumers);

    console.log(`[multi-instance] ${expected.length} messages acknowledged, ${kills} kills, ${pauses} pauses, ${retries} produce retries, ${orderedErrors} failed consumes`);
    expect(kills).toBeGreaterThan(0);
    expect(expected.length).toBeGreaterThan(100);
    expect(missingOrdered()).toEqual([]);
    expect(missingShared()).toEqual([]);
    expect(await lags()).toBe(0);

    // Each key in order: what came after a message of a key is the next one, or a redelivery of earlier ones.
    for (const [key, numbers] of ordered) {
      let highest = -1;
      for (const n of numbers) {
        if (n > highest) {
          expect(n, `key ${key}: ${numbers.join(",")}`).toBe(highest + 1);
          highest = n;
        }
      }
    }

    // Every record of every partition reads back with a good CRC.
    const problems: QueueProblem[] = [];
    let records = 0;
    for (let p = 0; p < PARTITIONS; p++) {
      let from: string | undefined = "earliest";
      while (from) {
        const page = await browseMessages(driver, partitionName(QUEUE, p), { from, limit: 1000, onProblem: (problem) => problems.push(problem) });
        records += page.messages.length;
        from = page.next ?? undefined;
      }
    }
    expect(problems.filter((p) => p.code !== "TORN_TAIL" && p.code !== "NO_INDEX")).toEqual([]);
    // Idempotency keys kept retries from writing twice: exactly the messages acknowledged.
    expect(records).toBe(expected.length);
  });
});
