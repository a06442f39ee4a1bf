import { execFile, execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { startServer } from "./_server";
import { expectEndedEarly } from "../helpers/timing";

const run = promisify(execFile);
const writerScript = fileURLToPath(new URL("_writer-process.ts", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
/** Queue directories written by the Rust crate v_queue 0.2.7 (test/fixtures/v_queue-0.2.7/README.md). */
const fixtures = fileURLToPath(new URL("../fixtures/v_queue-0.2.7/", import.meta.url));

const writeFromOtherProcess = (dir: string, queue: string, delayMs: number, messages: string[]) =>
  run(process.execPath, ["--import", "jiti/register", writerScript, dir, queue, String(delayMs), ...messages], { cwd: repoRoot });

interface Consumed {
  messages: { data: string; part: number; seq: number }[];
}

describe("queues written by other processes", () => {
  it("lists and serves a queue written by another process", async () => {
    const s = await startServer();
    await writeFromOtherProcess(s.dir, "external", 0, ["e1", "e2", "e3"]);
    expect(await (await s.get("/api/v1/queues")).json()).toEqual({ queues: ["external"] });
    expect(await (await s.get("/api/v1/queues/external")).json()).toMatchObject({ name: "external", messages: 3 });
    const got = (await (await s.get("/api/v1/queues/external/consumers/c/messages?max_messages=10")).json()) as Consumed;
    expect(got.messages.map((m) => m.data)).toEqual(["e1", "e2", "e3"]);
  });

  it("wakes a parked long poll when another process writes (polling the info file)", async () => {
    const s = await startServer();
    await writeFromOtherProcess(s.dir, "external", 0, ["first"]);
    await s.get("/api/v1/queues/external/consumers/c/messages");
    const t = performance.now();
    const pending = s.get("/api/v1/queues/external/consumers/c/messages?max_messages=10&timeout_ms=30000");
    await writeFromOtherProcess(s.dir, "external", 300, ["late"]);
    const got = (await (await pending).json()) as Consumed;
    expect(got.messages.map((m) => m.data)).toEqual(["late"]);
    expectEndedEarly(t, 30_000);
  });

  it("serves the Rust crate's fixture: c1 resumes at msg-3, a new consumer reads all 15", async () => {
    const s = await startServer();
    execFileSync("tar", ["-xf", join(fixtures, "basic-c1-first.tar"), "-C", s.root]);
    // The tar holds q/: serve that directory.
    const dir = join(s.root, "q");
    await s.close();
    const served = await startServer({ dir });
    expect((await (await served.get("/api/v1/queues")).json()).queues).toEqual(["basic_q"]);
    expect(await (await served.get("/api/v1/queues/basic_q")).json()).toMatchObject({ name: "basic_q", id: 1, count_pushed: 5, parts: 2, messages: 15 });
    const consumers = await (await served.get("/api/v1/queues/basic_q/consumers")).json();
    expect(consumers.consumers).toMatchObject([{ name: "c1", part: 0, count_popped: 3, lag: 12 }]);

    const c1 = (await (await served.get("/api/v1/queues/basic_q/consumers/c1/messages?max_messages=100")).json()) as Consumed;
    expect(c1.messages.map((m) => m.data)).toEqual(Array.from({ length: 12 }, (_, i) => `msg-${i + 3}`));
    const fresh = (await (await served.get("/api/v1/queues/basic_q/consumers/fresh/messages?max_messages=100")).json()) as Consumed;
    expect(fresh.messages.map((m) => m.data)).toEqual(Array.from({ length: 15 }, (_, i) => `msg-${i}`));
    expect(fresh.messages.map((m) => m.part)).toEqual([...Array(10).fill(0), ...Array(5).fill(1)]);

    // Produce into it, then commit c1: its position file is the crate's line.
    expect((await served.post("/api/v1/queues/basic_q/messages", "from-http")).status).toBe(201);
    expect((await served.post("/api/v1/queues/basic_q/consumers/c1/commit")).status).toBe(200);
    expect(readFileSync(join(dir, "basic_q_info_pop_c1"), "utf8").split("\n")[0]).toMatch(/^basic_q;c1;\d+;5;1$/);
    const next = (await (await served.get("/api/v1/queues/basic_q/consumers/c1/messages?max_messages=100")).json()) as Consumed;
    expect(next.messages.map((m) => m.data)).toEqual(["from-http"]);
  });
});
