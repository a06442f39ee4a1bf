import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { startChild } from "../helpers/spawn";
import { basic, errorCode, jsonHeaders, startServer } from "./_server";
import { sleep } from "../helpers/sleep";

const poll = (timeoutMs: number, consumer = "c") => `/api/v1/queues/q/consumers/${consumer}/messages?timeout_ms=${timeoutMs}&max_messages=100`;
const data = async (res: Response): Promise<string[]> => ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);
const pushAll = (s: { post: (path: string, body: string, headers: Record<string, string>) => Promise<Response> }, messages: string[]) =>
  s.post("/api/v1/queues/q/messages", JSON.stringify({ messages }), jsonHeaders);

describe("purge and delete over HTTP", () => {
  it("need the admin right (403 otherwise), and answer 404 for an unknown queue", async () => {
    const users = [
      { username: "full", password: "f" },
      { username: "rw", password: "r", admin: false },
    ];
    const s = await startServer({ auth: { users } });
    const rw = basic("rw", "r");
    await s.post("/api/v1/queues/q/messages", "x", rw);
    for (const res of [await s.del("/api/v1/queues/q", { headers: rw }), await s.post("/api/v1/queues/q/purge", undefined, rw)]) {
      expect(res.status).toBe(403);
      expect(await errorCode(res)).toBe("E_FORBIDDEN");
    }
    const full = basic("full", "f");
    const missing = await s.del("/api/v1/queues/nope", { headers: full });
    expect(missing.status).toBe(404);
    expect(await errorCode(missing)).toBe("E_NOT_FOUND");
    expect((await s.post("/api/v1/queues/nope/purge", undefined, full)).status).toBe(404);
    expect((await s.post("/api/v1/queues/q/purge", undefined, full)).status).toBe(200);
    expect((await s.del("/api/v1/queues/q", { headers: full })).status).toBe(200);
  });

  it("purge: closes the server's own writer and consumers, ends parked polls empty, and the consumers go on at the new start", async () => {
    const s = await startServer();
    await pushAll(s, ["a", "b", "c"]);
    const first = (await (await s.get(poll(0))).json()) as { cursor: string };
    expect(first.cursor).toBe("0.78.3");
    await s.post(`/api/v1/queues/q/consumers/c/commit`);
    const parked = s.get(poll(30_000));
    await sleep(100);
    const res = await s.post("/api/v1/queues/q/purge");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ queue: "q", messages: 3, bytes: 78, parts: 1, part: 1 });
    expect(await data(await parked)).toEqual([]);
    await pushAll(s, ["after"]);
    expect(await data(await s.get(poll(0)))).toEqual(["after"]);
    // A cursor from before the purge names nothing now.
    const seek = await s.post("/api/v1/queues/q/consumers/c/seek", JSON.stringify({ to: first.cursor }), jsonHeaders);
    expect(seek.status).toBe(409);
    expect(await data(await s.get(poll(0, "new")))).toEqual(["after"]);
  });

  it("delete: removes every file, ends parked polls with 404, and a push after it makes a new queue", async () => {
    const s = await startServer();
    await pushAll(s, ["a", "b"]);
    await s.post("/api/v1/queues/q-1/messages", "other", {});
    await s.get(poll(0));
    const parked = s.get(poll(30_000));
    await sleep(100);
    const res = await s.del("/api/v1/queues/q");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ queue: "q", deleted: true, parts: 1, consumers: ["c"] });
    expect((await parked).status).toBe(404);
    // Only the other queue's files are left (its writer is still open: its lock too).
    expect(readdirSync(s.dir).filter((name) => !name.startsWith("q-1"))).toEqual([]);
    expect((await (await s.get("/api/v1/queues")).json()).queues).toEqual(["q-1"]);
    expect((await s.get(poll(0))).status).toBe(404);
    expect((await s.del("/api/v1/queues/q")).status).toBe(404);
    await pushAll(s, ["new"]);
    expect(await data(await s.get(poll(0)))).toEqual(["new"]);
  });

  it("pushes racing a delete land before it or after it, never acknowledged and then lost", async () => {
    const s = await startServer();
    await pushAll(s, ["seed"]);
    const pushes = Array.from({ length: 40 }, (_, i) => s.post("/api/v1/queues/q/messages", `m${i}`, {}));
    const deleted = s.del("/api/v1/queues/q");
    const statuses = await Promise.all(pushes.map(async (p) => (await p).status));
    expect((await deleted).status).toBe(200);
    expect(statuses.every((status) => status === 201)).toBe(true);
    // The ones that landed after the delete made the queue again, and are all there; when all landed
    // before it (usual on Bun, whose fetch sends them faster), the queue is gone: 404, nothing kept.
    const after = await s.get(poll(0, "check"));
    const kept = after.status === 404 ? [] : await data(after);
    expect(kept).not.toContain("seed");
    for (const m of kept) expect(m).toMatch(/^m\d+$/);
  });

  it("409 while another process holds the writer or a consumer; the server's own are no obstacle", async () => {
    const s = await startServer();
    await pushAll(s, ["a"]);
    const child = startChild("hold-consumer", s.dir, "q", "other");
    try {
      await child.waitFor((line) => line === "ready");
      for (const res of [await s.post("/api/v1/queues/q/purge"), await s.del("/api/v1/queues/q"), await s.del("/api/v1/queues/q/consumers/other")]) {
        expect(res.status).toBe(409);
        const body = (await res.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe("E_LOCKED");
        expect(body.error.message).toContain('consumer "other"');
      }
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
    // Still whole: the server reopens its writer.
    await pushAll(s, ["b"]);
    expect(await data(await s.get(poll(0)))).toEqual(["a", "b"]);
    expect((await s.del("/api/v1/queues/q")).status).toBe(200);
    expect(existsSync(join(s.dir, "q_info_queue"))).toBe(false);
  });

  it("DELETE a consumer goes through the engine: refused (409) while a reader that is not the server's has it open", async () => {
    const s = await startServer();
    await pushAll(s, ["a"]);
    await s.get(poll(0));
    const other = await QueueConsumer.open("q", "x", { driver: fsDriver({ dir: s.dir }) });
    try {
      expect((await s.del("/api/v1/queues/q/consumers/x")).status).toBe(409);
    } finally {
      await other.close();
    }
    expect((await s.del("/api/v1/queues/q/consumers/x")).status).toBe(200);
    expect((await s.del("/api/v1/queues/q/consumers/c")).status).toBe(200);
    expect(readdirSync(s.dir).filter((name) => name.includes("_info_pop_"))).toEqual([]);
  });
});
