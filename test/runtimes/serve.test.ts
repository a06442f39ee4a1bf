/**
 * The built `v-queue serve` (bin/v-queue.mjs, fs driver) on Bun and on Deno, driven from Node:
 * the HTTP basics and a graceful SIGTERM, then SIGKILL under load and restart, again and again,
 * with every acknowledged produce read back. Deno runs with the flags of docs/runtimes.md, and without
 * --allow-run the restarted server must say why it cannot take over the lock.
 */
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { BIN, startCli, until } from "../cli/_cli";
import { call, startInstance, type ServeInstance } from "../helpers/multi-instance";
import { freePort } from "../helpers/net";
import { DENO_FLAGS, runtimeBinary } from "../helpers/runtime";
import { useTempDirs } from "../helpers/tmp";
import { expectEndedEarly } from "../helpers/timing";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-runtime-serve-");
const KILLS = 4;
const PRODUCERS = 4;

/** Produces `<round>-<loop>-<i>` one after another per loop until the server dies; returns the acknowledged bodies. */
async function produceUntilDead(url: string, round: number, loop: number, acked: string[] = []): Promise<string[]> {
  for (let i = 0; ; i++) {
    const body = `${round}-${loop}-${i}`;
    const res = await call(`${url}/api/v1/queues/load/messages`, { method: "POST", body, headers: { "content-type": "text/plain" } }, 10_000);
    if (!res) return acked;
    if (res.status !== 201) throw new Error(`produce answered ${res.status}: ${await res.text()}`);
    acked.push(body);
  }
}

/** Every message of `queue`, read in this (Node) process. */
async function readAll(dir: string, queue: string): Promise<string[]> {
  const consumer = await QueueConsumer.open(queue, "check", { driver: fsDriver({ dir }), onProblem: () => {} });
  const out: string[] = [];
  const text = new TextDecoder();
  for (let batch = await consumer.read({ max: 5000 }); batch.length > 0; batch = await consumer.read({ max: 5000 })) {
    out.push(...batch.map((m) => (typeof m.data === "string" ? m.data : text.decode(m.data as Uint8Array))));
  }
  await consumer.close();
  return out;
}

async function killAndWait(instance: ServeInstance): Promise<void> {
  const child = instance.child!;
  const exited = new Promise((done) => child.once("exit", done));
  instance.kill("SIGKILL");
  await exited;
}

describe.each(["bun", "deno"] as const)("v-queue serve on %s", (runtime) => {
  it("produces, long-polls, commits; on SIGTERM answers the parked poll, exits 0 and frees the lock", async () => {
    const dir = await freshDir();
    const port = await freePort();
    const run = startCli(["serve", "--dir", dir, "--port", String(port), "--no-auth"], { runtime });
    const url = `http://127.0.0.1:${port}`;
    try {
      await until(run.output, (r) => r.stdout.includes("serving"));
      const api = `${url}/api/v1/queues/q`;
      expect((await fetch(`${api}/messages`, { method: "POST", body: "hello", headers: { "content-type": "text/plain" } })).status).toBe(201);
      const got = (await (await fetch(`${api}/consumers/c/messages?timeout_ms=0`)).json()) as { messages: { data: string }[] };
      expect(got.messages.map((m) => m.data)).toEqual(["hello"]);
      expect((await fetch(`${api}/consumers/c/commit`, { method: "POST" })).status).toBe(200);
      const parked = fetch(`${api}/consumers/c/messages?timeout_ms=30000`);
      await sleep(200);
      const started = performance.now();
      run.child.kill("SIGTERM");
      const res = await parked;
      expect(res.status).toBe(200);
      expect(((await res.json()) as { messages: unknown[] }).messages).toEqual([]);
      const done = await run.exited;
      expect(done.code, done.stderr).toBe(0);
      // The SIGTERM, not the poll's timeout, ended the wait and the process.
      expectEndedEarly(started, 30_000);
      expect(done.stdout + done.stderr).toContain("Closed.");
      // The writer lock is free: a writer opens the queue in this process.
      const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none" });
      await writer.close();
    } finally {
      run.child.kill("SIGKILL");
    }
  });

  it(`loses no acknowledged produce across ${KILLS} SIGKILLs under load and restarts`, async () => {
    const dir = await freshDir();
    const acked: string[] = [];
    const instance = await startInstance(["--dir", dir, "--no-auth"], runtime);
    for (let round = 0; round < KILLS; round++) {
      if (round > 0) await instance.start();
      const roundAcked: string[] = [];
      const loops = Array.from({ length: PRODUCERS }, (_, loop) => produceUntilDead(instance.url, round, loop, roundAcked));
      // Killed at a random moment once the restarted server answers (its first produce takes the
      // stale lock over, which a loaded machine may take a while to do).
      for (const deadline = Date.now() + 20_000; roundAcked.length === 0 && Date.now() < deadline;) await sleep(10);
      await sleep(300 + Math.random() * 600);
      await killAndWait(instance);
      await Promise.all(loops);
      expect(roundAcked.length, `round ${round} acknowledged nothing`).toBeGreaterThan(0);
      acked.push(...roundAcked);
    }
    const stored = await readAll(dir, "load");
    const present = new Set(stored);
    expect(present.size, "a message stored twice").toBe(stored.length);
    expect(
      acked.filter((body) => !present.has(body)),
      "acknowledged but lost",
    ).toEqual([]);
    // Each loop's messages in the order it produced them.
    const last = new Map<string, number>();
    for (const body of stored) {
      const [round, loop, i] = body.split("-");
      const key = `${round}-${loop}`;
      expect(Number(i), body).toBeGreaterThan(last.get(key) ?? -1);
      last.set(key, Number(i));
    }
    console.log(`${runtime}: ${KILLS} SIGKILLs, ${acked.length} acknowledged, ${stored.length} stored (${stored.length - acked.length} in flight at a kill)`);
  }, 120_000);

  it.runIf(runtime === "deno")("without --allow-run, a restart after a SIGKILL says why it cannot take the lock over", async () => {
    const dir = await freshDir();
    const port = await freePort();
    const flags = DENO_FLAGS.filter((flag) => flag !== "--allow-run");
    const url = `http://127.0.0.1:${port}/api/v1/queues/q/messages`;
    const serve = () => spawn(runtimeBinary("deno"), ["run", ...flags, BIN, "serve", "--dir", dir, "--port", String(port), "--no-auth"], { stdio: "ignore" });
    const waitUp = async () => {
      for (let deadline = Date.now() + 20_000; Date.now() < deadline; await sleep(50)) {
        if (await call(`http://127.0.0.1:${port}/health`)) return;
      }
      throw new Error("deno serve did not start");
    };
    const first = serve();
    await waitUp();
    expect((await fetch(url, { method: "POST", body: "a" })).status).toBe(201);
    const exited = new Promise((done) => first.once("exit", done));
    first.kill("SIGKILL");
    await exited;
    const second = serve();
    try {
      await waitUp();
      const res = await fetch(url, { method: "POST", body: "b" });
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(res.status).toBe(409);
      expect(body.error.code).toBe("E_LOCKED");
      expect(body.error.message).toMatch(/Cannot tell whether process \d+, named in the lock file .* is still alive: .*--allow-run/);
    } finally {
      second.kill("SIGKILL");
    }
  });
});
