/**
 * The server under a low fd limit (`ulimit -n 256`), with ~300 consumers polling: an open
 * consumer holds a few descriptors, so they cannot all be open at once. Every answer must be
 * 200/204 or 503 with `Retry-After` (never a 500, never a reset connection), and after
 * retries every consumer gets every message. Loopback only, bounded, with timeouts.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { Agent, request } from "node:http";
import { resolve } from "pathe";
import { afterEach, describe, expect, it } from "vitest";
import { freePort } from "../helpers/net";
import { scriptCommand } from "../helpers/runtime";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

const SERVER = resolve(import.meta.dirname, "_fd-server-process.ts");
const FD_LIMIT = 256;
const CONSUMERS = 300;
/** Sockets the test keeps open to the server at once (each is a descriptor there too). */
const SOCKETS = 32;
const tempDir = useTempDirs("vq-fd-");

interface LimitedServer {
  port: number;
  stderr(): string;
  stop(): Promise<void>;
}

const started: LimitedServer[] = [];
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

/** The server in a process whose fd limit is `FD_LIMIT` (soft and hard). */
async function startLimited(options: Record<string, unknown> = {}): Promise<LimitedServer> {
  const dir = await tempDir();
  const port = await freePort();
  // $0 and "$@": no quoting of paths into the script.
  const { command, args } = scriptCommand(SERVER, [dir, String(port), JSON.stringify(options)]);
  const child: ChildProcess = spawn("bash", ["-c", `ulimit -n ${FD_LIMIT} && exec "$0" "$@"`, command, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  // As the other tests' servers: a loaded machine may take long to start one.
  const deadline = Date.now() + 60_000;
  while (!stdout.includes("listening")) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`server did not start: ${stdout}${stderr}`);
    await sleep(20);
  }
  const server: LimitedServer = {
    port,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
  started.push(server);
  return server;
}

type Answer = { status: number; retryAfter?: string; body: string } | { error: string };

/** One request over a shared keep-alive pool of `SOCKETS` connections; network failures come back as `{ error }`. */
function call(agent: Agent, port: number, method: string, path: string, body?: string): Promise<Answer> {
  return new Promise((done) => {
    const req = request({ host: "127.0.0.1", port, method, path, agent, timeout: 15_000, headers: body ? { "content-type": "text/plain" } : {} }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (text += d));
      res.on("end", () => done({ status: res.statusCode!, retryAfter: res.headers["retry-after"], body: text }));
      res.on("error", (error: NodeJS.ErrnoException) => done({ error: error.code ?? error.message }));
    });
    req.on("timeout", () => req.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })));
    req.on("error", (error: NodeJS.ErrnoException) => done({ error: error.code ?? error.message }));
    req.end(body);
  });
}

describe(`under ulimit -n ${FD_LIMIT}, ${CONSUMERS} consumers`, () => {
  it.each([
    // The default cap is far more than fits: the server runs out of descriptors (EMFILE) and recovers.
    { label: "default maxConsumers (EMFILE)", options: {} },
    // A cap that fits: no EMFILE at all, only 503s while every open consumer is in use.
    { label: "maxConsumers 32", options: { maxConsumers: 32 } },
  ])(
    "$label: get 200 or 503 with Retry-After (never a 500 or a reset), and every message in the end",
    async ({ options }) => {
      const server = await startLimited(options);
      const agent = new Agent({ keepAlive: true, maxSockets: SOCKETS });
      try {
        const produce = async (text: string) => {
          const answer = await call(agent, server.port, "POST", "/api/v1/queues/q/messages", text);
          expect(answer).toMatchObject({ status: 201 });
        };
        await produce("first");
        await produce("second");

        const tally = new Map<string, number>();
        const problems: string[] = [];
        const count = (key: string) => tally.set(key, (tally.get(key) ?? 0) + 1);
        const deadline = Date.now() + 120_000;
        const received = new Map<string, Set<number>>();
        const consumeAll = async (name: string) => {
          const seen = new Set<number>();
          received.set(name, seen);
          // No commits: a consumer closed to make room hands its messages out again; count each seq once.
          while (seen.size < 3 && Date.now() < deadline) {
            const answer = await call(agent, server.port, "GET", `/api/v1/queues/q/consumers/${name}/messages?max_messages=10&timeout_ms=300`);
            if ("error" in answer) {
              count(`network ${answer.error}`);
              problems.push(`${name}: ${answer.error}`);
              await sleep(100);
            } else if (answer.status === 200 || answer.status === 204) {
              count(String(answer.status));
              if (answer.status === 200) for (const m of (JSON.parse(answer.body) as { messages: { seq: number }[] }).messages) seen.add(m.seq);
            } else if (answer.status === 503 && answer.retryAfter && JSON.parse(answer.body).error?.code === "E_BUSY") {
              count("503");
              // Retry-After says 1 s; spread the retries over it so they do not come back as one wave.
              await sleep(Number(answer.retryAfter) * 1000 * (0.25 + Math.random()));
            } else {
              count(`${answer.status}`);
              problems.push(`${name}: ${answer.status} ${answer.retryAfter ?? "-"} ${answer.body.slice(0, 200)}`);
              await sleep(100);
            }
          }
        };
        const names = Array.from({ length: CONSUMERS }, (_, i) => `c${i}`);
        const all = Promise.all(names.map((name) => consumeAll(name)));
        // A third message while they poll: some consumers are in a long poll by then, some wait to reopen.
        await sleep(1500);
        await produce("third");
        await all;

        const summary = { tally: Object.fromEntries(tally), problems: problems.slice(0, 10), serverLog: server.stderr().split("\n").slice(0, 10) };
        console.log(`fd-limit: ${JSON.stringify(summary, null, 1)}`);
        expect(problems, JSON.stringify(summary)).toEqual([]);
        expect(names.filter((name) => received.get(name)!.size < 3)).toEqual([]);
        if ("maxConsumers" in options) expect(server.stderr()).not.toMatch(/Too many open files|EMFILE/);
      } finally {
        agent.destroy();
      }
    },
    150_000,
  );
});
