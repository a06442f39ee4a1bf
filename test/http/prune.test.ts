import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { createClient } from "../../client/index";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { listParts } from "../../src/log/recovery";
import { basic, errorCode, jsonHeaders, startServer, type TestServer } from "./_server";

/** Parts 0..n-1 of ten messages each, written before the server opens the queue (each writer rolls on reopen). */
async function partsOfTen(s: TestServer, n: number): Promise<void> {
  for (let p = 0; p < n; p++) {
    const q = await QueueWriter.open("q", { driver: fsDriver({ dir: s.dir }), durability: "none" });
    await q.pushBatch(Array.from({ length: 10 }, (_, i) => `m${p * 10 + i}`));
    await q.close();
  }
}

describe("POST /api/v1/queues/{queue}/prune", () => {
  it("needs the admin right, applies the server's retention or the body's, and answers what it deleted", async () => {
    const s = await startServer({
      auth: {
        users: [
          { username: "root", password: "r" },
          { username: "reader", password: "r", read: true, write: false },
        ],
      },
      queues: { q: { retention: { maxParts: 3 } } },
    });
    await partsOfTen(s, 5); // parts 0..4, 4 is current (the server's writer is not open)
    let res = await s.post("/api/v1/queues/q/prune", undefined, basic("reader", "r"));
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe("E_FORBIDDEN");
    res = await s.post("/api/v1/queues/q/prune", undefined, basic("root", "r"));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ queue: "q", parts: [0, 1], messages: 20, bytes: 10 * 27 + 10 * 28 });
    res = await s.post("/api/v1/queues/q/prune", JSON.stringify({ maxParts: 1 }), { ...jsonHeaders, ...basic("root", "r") });
    expect(await res.json()).toMatchObject({ parts: [2, 3], messages: 20 });
    expect(await listParts(fsDriver({ dir: s.dir }), "q")).toEqual([4]);
    for (const bad of ['{"maxParts": 0}', '{"every": 1}', "[", '"x"']) {
      res = await s.post("/api/v1/queues/q/prune", bad, { ...jsonHeaders, ...basic("root", "r") });
      expect(res.status, bad).toBe(400);
      expect(await errorCode(res)).toBe("E_BODY");
    }
    expect((await s.post("/api/v1/queues/nope/prune", undefined, basic("root", "r"))).status).toBe(404);
  });

  it("a consumer whose messages were deleted is told how many in the consume answer (JSON and binary), and the client's prune() and seek by time", async () => {
    const s = await startServer();
    await partsOfTen(s, 3);
    const vq = createClient({ baseURL: s.url });
    expect((await vq.consume("q", "json", { maxMessages: 3 })).missed).toBe(0);
    await vq.commit("q", "json");
    expect((await vq.consume("q", "bin", { maxMessages: 5, format: "binary" })).missed).toBe(0);
    await vq.commit("q", "bin");
    // The server closes idle consumers only later: the two keep reading where they are, on open files.
    expect(await vq.prune("q", { maxParts: 1 })).toMatchObject({ parts: [0, 1], messages: 20 });
    const json = await vq.consume("q", "json", { maxMessages: 100 });
    const bin = await vq.consume("q", "bin", { maxMessages: 100, format: "binary" });
    // fs: each finishes part 0 from its open file, then misses part 1.
    expect([json.messages.length, json.missed]).toEqual([7 + 10, 10]);
    expect([bin.messages.length, bin.missed]).toEqual([5 + 10, 10]);
    const raw = await s.get("/api/v1/queues/q/consumers/new/messages?max_messages=100");
    expect(((await raw.json()) as { missed?: number }).missed).toBeUndefined(); // a new consumer starts at the oldest left: missed nothing
    await vq.seek("q", "json", { time: new Date(Date.now() - 3_600_000).toISOString() });
    expect((await vq.consume("q", "json", { maxMessages: 100 })).messages.map((m) => m.data)).toEqual(Array.from({ length: 10 }, (_, i) => `m${20 + i}`));
    const res = await s.post("/api/v1/queues/q/consumers/json/seek", JSON.stringify({ to: { time: "yesterday-ish" } }), jsonHeaders);
    expect(res.status).toBe(400);
  });
});

describe("POST /api/v1/queues/{queue}/prune with limits", () => {
  it("applies the limits given in place of the server's, not merged with them", async () => {
    const s = await startServer({ queues: { q: { retention: { maxParts: 1 } } } });
    await partsOfTen(s, 4);
    const res = await s.post("/api/v1/queues/q/prune", JSON.stringify({ maxBytes: 1_000_000 }), jsonHeaders);
    expect(await res.json()).toMatchObject({ parts: [], messages: 0 });
    expect(await listParts(fsDriver({ dir: s.dir }), "q")).toEqual([0, 1, 2, 3]);
  });
});

describe("subscribe() and retention", () => {
  it("tells onMissed how many messages retention deleted before the loop read them, and goes on at the oldest left", async () => {
    const s = await startServer();
    await partsOfTen(s, 3); // parts 0, 1, 2 (current)
    const vq = createClient({ baseURL: s.url });
    // The consumer's saved position is the start of part 0; then retention takes parts 0 and 1.
    const early = await QueueConsumer.open("q", "sub", { driver: fsDriver({ dir: s.dir }) });
    await early.commit();
    await early.close();
    await vq.prune("q", { maxParts: 1 });
    const missed: number[] = [];
    const abort = new AbortController();
    const seen: unknown[] = [];
    for await (const message of vq.subscribe("q", "sub", { signal: abort.signal, pollTimeoutMs: 200, onMissed: (n) => missed.push(n) })) {
      seen.push(message.data);
      if (seen.length === 10) abort.abort();
    }
    expect(missed).toEqual([20]);
    expect(seen).toEqual(Array.from({ length: 10 }, (_, i) => `m${20 + i}`));
  });
});
