/**
 * `npm run bench -- runtimes` (issue 16): the standalone server's HTTP produce and consume on
 * Node, Bun and Deno in one run. Each round starts a fresh server (bench/runtime-server.mjs, the
 * built dist/, fs driver) on each runtime in turn, the order alternating, and this Node process
 * measures it with the same client as the HTTP bench: produce in batches of 1000 (JSON), produce
 * one message per request, consume in batches of 1000 (JSON, each committed). Beside each rate,
 * the server's CPU time (user + system, /proc) per 1000 messages or requests. Figures are medians
 * of the rounds; ratios are medians of each round's ratio to Node.
 * VQ_BENCH_REPEATS sets the rounds, VQ_BENCH_HTTP_SECONDS each measurement's length;
 * VQ_BENCH_RUNTIMES=bun,deno and VQ_BENCH_RUNTIMES_PARTS=produce,single,consume pick (a consume
 * alone fills its queue unmeasured first); VQ_BENCH_RUNTIMES_PROFILE=<dir> writes a CPU profile
 * of each server (Node and Bun: --cpu-prof; Deno: --perf-basic-prof, for `perf record -g`).
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpus, loadavg, totalmem } from "node:os";
import { Agent } from "node:http";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { RUNTIMES, runtimeBinary, scriptCommand, type Runtime } from "../test/helpers/runtime";
import { call, consumeRate, runFor } from "./http";
import { cpuMsOf, formatRate, formatTable, median, progress, removeDir, tempDir } from "./util";

const ROUNDS = Math.max(1, Number(process.env.VQ_BENCH_REPEATS) || 5);
const SECONDS = Number(process.env.VQ_BENCH_HTTP_SECONDS) || 2;
const PROFILE = process.env.VQ_BENCH_RUNTIMES_PROFILE;
const BATCH = 1000;
const SIZE = 100;
const CLIENTS = 4;
const SINGLE_CLIENTS = 16;
const SERVER = fileURLToPath(new URL("./runtime-server.mjs", import.meta.url));
const PICKED = RUNTIMES.filter((r) => (process.env.VQ_BENCH_RUNTIMES || RUNTIMES.join(",")).split(",").includes(r));
const PARTS = new Set((process.env.VQ_BENCH_RUNTIMES_PARTS || "produce,single,consume").split(","));

type Scenario = "produce" | "single" | "consume";
const SCENARIOS: { key: Scenario; label: string; unit: string }[] = [
  { key: "produce", label: `produce, JSON batches of ${BATCH}, ${CLIENTS} clients`, unit: "msgs/s" },
  { key: "single", label: `produce, one message per request, ${SINGLE_CLIENTS} clients`, unit: "requests/s" },
  { key: "consume", label: `consume, JSON batches of ${BATCH}, each committed, ${CLIENTS} consumers`, unit: "msgs/s" },
];

/** One scenario of one round on one runtime: the rate, and the server's CPU ms per 1000 items. */
interface Measured {
  rate: number;
  cpuMsPer1000: number;
}

export async function runRuntimesBench(): Promise<void> {
  console.log(
    `\n## Runtimes (issue 16): v-queue serve (fs driver, durability "interval") on Node, Bun and Deno, ${SIZE}-byte messages, median of ${ROUNDS} interleaved rounds of ${SECONDS} s per figure\n`,
  );
  console.log(machineFacts());
  const results = new Map<string, Measured[]>();
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const payloads = Array.from({ length: BATCH }, (_, i) => `${i}`.padEnd(SIZE, "x"));
  const batch = Buffer.from(JSON.stringify({ messages: payloads }));
  const one = Buffer.from("x".repeat(SIZE));
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const runtime of round % 2 ? [...PICKED].reverse() : PICKED) {
        progress(`round ${round + 1}/${ROUNDS}: ${runtime} ...`);
        const dir = tempDir(`runtimes-${runtime}`);
        const server = await startServer(runtime, dir);
        try {
          const measure = async (key: Scenario, run: () => Promise<number>) => {
            if (!PARTS.has(key)) return;
            const cpu = server.cpuMs();
            const start = performance.now();
            const items = await run();
            const seconds = (performance.now() - start) / 1000;
            const cpuMs = server.cpuMs() - cpu;
            const list = results.get(`${runtime} ${key}`) ?? [];
            list.push({ rate: items / seconds, cpuMsPer1000: (cpuMs / items) * 1000 });
            results.set(`${runtime} ${key}`, list);
          };
          const produce = async () =>
            BATCH *
            (await runFor(CLIENTS, async () =>
              expectStatus(await call(agent, server.port, "POST", "/api/v1/queues/bench/messages", batch, { "content-type": "application/json" }), 201),
            ));
          if (PARTS.has("consume") && !PARTS.has("produce")) await produce();
          await measure("produce", produce);
          await measure("single", () =>
            runFor(SINGLE_CLIENTS, async () =>
              expectStatus(await call(agent, server.port, "POST", "/api/v1/queues/single/messages", one, { "content-type": "text/plain" }), 201),
            ),
          );
          // consumeRate reads queue "bench" for SECONDS; the rate it returns times its length is the count.
          await measure("consume", async () => {
            const start = performance.now();
            const rate = await consumeRate(agent, server.port, `r${round}-`, false, CLIENTS);
            return (rate * (performance.now() - start)) / 1000;
          });
        } finally {
          await server.stop();
          removeDir(dir);
        }
      }
    }
  } finally {
    agent.destroy();
  }
  console.log(formatTable(["scenario", "node", "bun", "deno", "bun / node", "deno / node", "server CPU ms per 1000: node / bun / deno"], rowsOf(results)));
  console.log(
    `\nRatios are medians of each round's ratio. Server CPU: user + system time of the server process over the measurement (/proc, 10 ms ticks), per 1000 messages (per 1000 requests for one-per-request). The client is this Node process on the same cores.`,
  );
}

function rowsOf(results: Map<string, Measured[]>): string[][] {
  return SCENARIOS.filter(({ key }) => PARTS.has(key)).map(({ key, label, unit }) => {
    const of = (runtime: Runtime) => results.get(`${runtime} ${key}`) ?? [];
    const rate = (runtime: Runtime) => formatRate(median(of(runtime).map((m) => m.rate)));
    const ratio = (runtime: Runtime) =>
      of(runtime).length > 0 && of("node").length === of(runtime).length
        ? `${median(of(runtime).map((m, i) => m.rate / of("node")[i]!.rate)).toFixed(2)}x`
        : "-";
    const cpu = RUNTIMES.map((runtime) => median(of(runtime).map((m) => m.cpuMsPer1000)).toFixed(1)).join(" / ");
    return [`${label} (${unit})`, rate("node"), rate("bun"), rate("deno"), ratio("bun"), ratio("deno"), cpu];
  });
}

function expectStatus(reply: { status: number; body: Buffer }, status: number): void {
  if (reply.status !== status) throw new Error(`expected ${status}, got ${reply.status}: ${reply.body.toString().slice(0, 200)}`);
}

interface Server {
  port: number;
  /** The process's user + system CPU time so far, in ms. */
  cpuMs(): number;
  stop(): Promise<void>;
}

/** Profiling flags per runtime. */
function profileFlags(runtime: Runtime, dir: string): string[] {
  // Deno has no --cpu-prof, and Node 20's --prof-process cannot read Deno's V8 log: perf can.
  if (runtime === "deno") return ["--v8-flags=--perf-basic-prof"];
  return ["--cpu-prof", `--cpu-prof-dir=${dir}`];
}

async function startServer(runtime: Runtime, dir: string): Promise<Server> {
  const { command, args } = scriptCommand(SERVER, [], runtime);
  // The profile flags go before the script (Deno: after `run`).
  const at = runtime === "deno" ? 1 : 0;
  if (PROFILE) args.splice(at, 0, ...profileFlags(runtime, PROFILE));
  const child: ChildProcess = spawn(command, args, { env: { ...process.env, VQ_BENCH_HTTP_DIR: dir }, stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`${runtime} server exited with ${code}`)));
  });
  const { port } = JSON.parse(line) as { port: number };
  return {
    port,
    cpuMs: () => cpuMsOf(child.pid!),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

function machineFacts(): string {
  const cpu = cpus();
  const version = (runtime: "bun" | "deno") => spawnSync(runtimeBinary(runtime), ["--version"], { encoding: "utf8" }).stdout.split("\n")[0]!.trim();
  return `Machine: ${cpu.length} cores (${cpu[0]?.model ?? "?"}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, Bun ${version("bun")}, ${version("deno")}; load average ${loadavg()[0]!.toFixed(2)} at the start. Server and client share these cores.\n`;
}
