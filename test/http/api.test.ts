import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { H3 } from "h3";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { BATCH_CONTENT_TYPE, createQueueHandler, decodeBatch, encodeProduceBatch } from "../../runtime/index";
import { errorCode, jsonHeaders, startServer } from "./_server";

interface Consumed {
  count: number;
  cursor: string | null;
  messages: { part: number; offset: number; seq: number; type: string; data: string; encoding?: string; cursor: string }[];
}

describe("HTTP API, every endpoint on a real server", () => {
  it("GET /health answers ok with the version", async () => {
    const s = await startServer();
    const res = await s.get("/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
  });

  it("produces JSON, text, bytes and binary batches, and consumes them back in order with positions", async () => {
    const s = await startServer();
    const q = "/api/v1/queues/orders";
    let res = await s.post(`${q}/messages`, JSON.stringify({ message: "one" }), jsonHeaders);
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ queue: "orders", count: 1, first: { part: 0, offset: 0, seq: 1 }, last: { part: 0, offset: 0, seq: 1 } });
    res = await s.post(`${q}/messages`, JSON.stringify({ messages: ["two", { n: 3 }, 4] }), jsonHeaders);
    expect((await res.json()).count).toBe(3);
    res = await s.post(`${q}/messages`, JSON.stringify({ messages: ["AAH+/w=="], encoding: "base64" }), jsonHeaders);
    expect(res.status).toBe(201);
    res = await s.post(`${q}/messages`, "plain text ✓", { "content-type": "text/plain; charset=utf-8" });
    expect(res.status).toBe(201);
    res = await s.post(`${q}/messages`, new Uint8Array([9, 8, 7]), { "content-type": "application/octet-stream" });
    expect(res.status).toBe(201);
    res = await s.post(`${q}/messages`, encodeProduceBatch(["b1", new Uint8Array([255])]), { "content-type": BATCH_CONTENT_TYPE });
    expect((await res.json()).count).toBe(2);

    res = await s.get(`${q}/consumers/c1/messages?max_messages=100`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Consumed;
    expect(body.count).toBe(9);
    expect(body.messages.map((m) => [m.type, m.data, m.encoding])).toEqual([
      ["string", "one", undefined],
      ["string", "two", undefined],
      ["string", '{"n":3}', undefined],
      ["string", "4", undefined],
      ["object", "AAH+/w==", "base64"],
      ["string", "plain text ✓", undefined],
      ["object", "CQgH", "base64"],
      ["string", "b1", undefined],
      ["object", "/w==", "base64"],
    ]);
    expect(body.messages.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(body.messages[1]!.offset).toBe(25 + 3);
    expect(body.cursor).toBe(body.messages.at(-1)!.cursor);
    // The records are really in the crate's files.
    const part = readFileSync(join(s.dir, "orders-0", "orders_queue"));
    expect(part.subarray(25, 28).toString()).toBe("one");
  });

  it("max_messages defaults to 1, as the Rust server, and messages are handed out once", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["a", "b", "c"] }), jsonHeaders);
    const first = (await (await s.get("/api/v1/queues/q/consumers/c/messages")).json()) as Consumed;
    expect(first.messages.map((m) => m.data)).toEqual(["a"]);
    const next = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=5")).json()) as Consumed;
    expect(next.messages.map((m) => m.data)).toEqual(["b", "c"]);
    const none = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=5")).json()) as Consumed;
    expect(none).toMatchObject({ count: 0, cursor: null, messages: [] });
  });

  it("GET /api/v1/queues and /api/v1/queues/{queue} give the Rust fields plus totals", async () => {
    const s = await startServer();
    expect(await (await s.get("/api/v1/queues")).json()).toEqual({ queues: [] });
    await s.post("/api/v1/queues/b/messages", "x");
    await s.post("/api/v1/queues/a/messages", JSON.stringify({ messages: ["12345", "6789"] }), jsonHeaders);
    expect(await (await s.get("/api/v1/queues")).json()).toEqual({ queues: ["a", "b"] });
    const info = await (await s.get("/api/v1/queues/a")).json();
    expect(info).toEqual({ name: "a", id: 0, count_pushed: 2, is_ready: true, parts: 1, messages: 2, bytes: 25 * 2 + 9, consumers: 0 });
    const missing = await s.get("/api/v1/queues/nope");
    expect(missing.status).toBe(404);
    expect(await errorCode(missing)).toBe("E_NOT_FOUND");
  });

  it("commit: no body commits all handed out; a cursor commits up to its message; idempotent; resumes after restart", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["m1", "m2", "m3", "m4"] }), jsonHeaders);
    const got = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=3")).json()) as Consumed;
    const consumers = async () =>
      ((await (await s.get("/api/v1/queues/q/consumers")).json()) as { consumers: { name: string; count_popped: number; lag: number }[] }).consumers;
    expect(await consumers()).toMatchObject([{ name: "c", count_popped: 0, lag: 4 }]);

    // Up to m1, by JSON body.
    let res = await s.post("/api/v1/queues/q/consumers/c/commit", JSON.stringify({ cursor: got.messages[0]!.cursor }), jsonHeaders);
    expect(res.status).toBe(200);
    expect(await consumers()).toMatchObject([{ count_popped: 1, lag: 3 }]);
    // Up to m2, as a text body, twice (idempotent), then an older one (no-op).
    for (const cursor of [got.messages[1]!.cursor, got.messages[1]!.cursor, got.messages[0]!.cursor]) {
      res = await s.post("/api/v1/queues/q/consumers/c/commit", cursor, { "content-type": "text/plain" });
      expect(res.status).toBe(200);
    }
    expect(await consumers()).toMatchObject([{ count_popped: 2, lag: 2 }]);
    // Everything handed out (m3), no body, twice.
    for (let i = 0; i < 2; i++) {
      res = await s.post("/api/v1/queues/q/consumers/c/commit");
      expect(await res.json()).toEqual({ queue: "q", consumer: "c", committed: got.cursor });
    }
    expect(await consumers()).toMatchObject([{ count_popped: 3, lag: 1 }]);
    // A cursor past what was handed out is refused.
    res = await s.post("/api/v1/queues/q/consumers/c/commit?cursor=0.999.9");
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe("E_CURSOR");

    // A new server on the same directory resumes after the commit.
    const dir = s.dir;
    await s.close();
    const s2 = await startServer({ dir });
    const rest = (await (await s2.get("/api/v1/queues/q/consumers/c/messages?max_messages=10")).json()) as Consumed;
    expect(rest.messages.map((m) => m.data)).toEqual(["m4"]);
  });

  it("?commit= on a consume commits the previous batch in the same request", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["m1", "m2", "m3"] }), jsonHeaders);
    const first = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=2")).json()) as Consumed;
    const second = (await (await s.get(`/api/v1/queues/q/consumers/c/messages?max_messages=2&commit=${first.cursor}`)).json()) as Consumed;
    expect(second.messages.map((m) => m.data)).toEqual(["m3"]);
    const listed = await (await s.get("/api/v1/queues/q/consumers")).json();
    expect(listed.consumers[0]).toMatchObject({ name: "c", count_popped: 2, lag: 1, cursor: first.cursor });
    const bad = await s.get("/api/v1/queues/q/consumers/c/messages?commit=nope");
    expect(bad.status).toBe(400);
    expect(await errorCode(bad)).toBe("E_PARAM");
  });

  it("rewind hands out again what was handed out and not committed", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["m1", "m2", "m3"] }), jsonHeaders);
    const first = (await (await s.get("/api/v1/queues/q/consumers/c/messages")).json()) as Consumed;
    await s.post(`/api/v1/queues/q/consumers/c/commit?cursor=${first.cursor}`);
    await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=2"); // m2, m3: lost by the client
    const res = await s.post("/api/v1/queues/q/consumers/c/rewind");
    expect(await res.json()).toEqual({ queue: "q", consumer: "c", cursor: first.cursor });
    const again = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=5")).json()) as Consumed;
    expect(again.messages.map((m) => m.data)).toEqual(["m2", "m3"]);
    expect((await s.post("/api/v1/queues/q/consumers/nobody/rewind")).status).toBe(404);
  });

  it("commit on an unknown consumer is 404, and on an unknown queue too", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    let res = await s.post("/api/v1/queues/q/consumers/ghost/commit");
    expect(res.status).toBe(404);
    expect(await errorCode(res)).toBe("E_NOT_FOUND");
    res = await s.get("/api/v1/queues/none/consumers/c/messages");
    expect(res.status).toBe(404);
    expect(existsSync(join(s.dir, "none_info_queue"))).toBe(false);
  });

  it("consumes a batch as binary with Accept: application/vnd.v-queue.batch or application/octet-stream", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["héllo", "x".repeat(1000)] }), jsonHeaders);
    await s.post("/api/v1/queues/q/messages", new Uint8Array([0, 1, 2, 255]), { "content-type": "application/octet-stream" });
    const res = await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=10", { headers: { accept: BATCH_CONTENT_TYPE } });
    expect(res.headers.get("content-type")).toBe(BATCH_CONTENT_TYPE);
    expect(res.headers.get("x-vq-count")).toBe("3");
    const records = decodeBatch(new Uint8Array(await res.arrayBuffer()));
    expect(records.map((r) => r.data)).toEqual(["héllo", "x".repeat(1000), new Uint8Array([0, 1, 2, 255])]);
    expect(records.map((r) => [r.part, r.seq])).toEqual([
      [0, 1],
      [0, 2],
      [0, 3],
    ]);
    expect(records[1]!.offset).toBe(25 + 6);
    // The cursor header commits the batch.
    const cursor = res.headers.get("x-vq-cursor")!;
    expect((await s.post(`/api/v1/queues/q/consumers/c/commit?cursor=${cursor}`)).status).toBe(200);
    const consumers = await (await s.get("/api/v1/queues/q/consumers")).json();
    expect(consumers.consumers[0]).toMatchObject({ name: "c", count_popped: 3, lag: 0, cursor });

    await s.post("/api/v1/queues/q/messages", "next");
    const octet = await s.get("/api/v1/queues/q/consumers/c/messages", { headers: { accept: "application/octet-stream" } });
    expect(octet.headers.get("content-type")).toBe("application/octet-stream");
    expect(decodeBatch(new Uint8Array(await octet.arrayBuffer())).map((r) => r.data)).toEqual(["next"]);
  });

  it("DELETE a consumer removes its position: the name starts over", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["a", "b"] }), jsonHeaders);
    await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=2");
    await s.post("/api/v1/queues/q/consumers/c/commit");
    let res = await s.del("/api/v1/queues/q/consumers/c");
    expect(res.status).toBe(200);
    expect(existsSync(join(s.dir, "q_info_pop_c"))).toBe(false);
    expect((await (await s.get("/api/v1/queues/q/consumers")).json()).consumers).toEqual([]);
    res = await s.del("/api/v1/queues/q/consumers/c");
    expect(res.status).toBe(404);
    const again = (await (await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=5")).json()) as Consumed;
    expect(again.messages.map((m) => m.data)).toEqual(["a", "b"]);
  });

  it("serves an OpenAPI document that lists every route", async () => {
    const s = await startServer({ limits: { maxMessages: 500 } });
    const doc = await (await s.get("/api/v1/openapi.json")).json();
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths).sort()).toEqual([
      "/",
      "/_dashboard/{asset}",
      "/api/v1/openapi.json",
      "/api/v1/overview",
      "/api/v1/queues",
      "/api/v1/queues/{queue}",
      "/api/v1/queues/{queue}/browse",
      "/api/v1/queues/{queue}/consumers",
      "/api/v1/queues/{queue}/consumers/{consumer}",
      "/api/v1/queues/{queue}/consumers/{consumer}/ack",
      "/api/v1/queues/{queue}/consumers/{consumer}/backoff",
      "/api/v1/queues/{queue}/consumers/{consumer}/commit",
      "/api/v1/queues/{queue}/consumers/{consumer}/events",
      "/api/v1/queues/{queue}/consumers/{consumer}/extend",
      "/api/v1/queues/{queue}/consumers/{consumer}/lease",
      "/api/v1/queues/{queue}/consumers/{consumer}/messages",
      "/api/v1/queues/{queue}/consumers/{consumer}/nack",
      "/api/v1/queues/{queue}/consumers/{consumer}/outcome",
      "/api/v1/queues/{queue}/consumers/{consumer}/progress",
      "/api/v1/queues/{queue}/consumers/{consumer}/rewind",
      "/api/v1/queues/{queue}/consumers/{consumer}/seek",
      "/api/v1/queues/{queue}/messages",
      "/api/v1/queues/{queue}/overview",
      "/api/v1/queues/{queue}/prune",
      "/api/v1/queues/{queue}/purge",
      "/api/v1/queues/{queue}/redrive",
      "/api/v1/queues/{queue}/schedules",
      "/api/v1/queues/{queue}/schedules/{schedule}",
      "/health",
      "/metrics",
    ]);
    const params = doc.paths["/api/v1/queues/{queue}/consumers/{consumer}/messages"].get.parameters;
    expect(params.find((p: { name: string }) => p.name === "max_messages").schema.maximum).toBe(500);
  });

  it("answers unknown routes with 404 and wrong methods with 405, as JSON", async () => {
    const s = await startServer();
    let res = await s.get("/api/v1/nothing");
    expect(res.status).toBe(404);
    expect(await errorCode(res)).toBe("E_ROUTE");
    res = await s.post("/api/v1/queues/q");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, PUT, DELETE, HEAD");
    expect(await errorCode(res)).toBe("E_METHOD");
    res = await s.get("/api/v1/queues/q/messages");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    // HEAD must not hand messages out (and lose them).
    await s.post("/api/v1/queues/q/messages", "kept");
    res = await s.get("/api/v1/queues/q/consumers/c/messages", { method: "HEAD" });
    expect(res.status).toBe(405);
    expect((await (await s.get("/api/v1/queues/q/consumers/c/messages")).json()).messages[0].data).toBe("kept");
  });
});

describe("the app without a socket", () => {
  it("works through app.fetch and mounted into another h3 app under a prefix", async () => {
    const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none" });
    try {
      let res = await handler.fetch(
        new Request("http://x/api/v1/queues/q/messages", { method: "POST", body: "hi", headers: { "content-type": "text/plain" } }),
      );
      expect(res.status).toBe(201);
      const host = new H3();
      host.get("/", () => "host");
      host.mount("/vq", handler.app);
      res = await host.fetch(new Request("http://x/vq/api/v1/queues/q/consumers/c/messages"));
      expect((await res.json()).messages[0].data).toBe("hi");
      res = await host.fetch(new Request("http://x/vq/api/v1/queues/a%2Fb"));
      expect(res.status).toBe(400);
      expect(await errorCode(res)).toBe("E_NAME");
      res = await host.fetch(new Request("http://x/vq/api/v1/nothing"));
      expect(res.status).toBe(404);
      expect(await errorCode(res)).toBe("E_ROUTE");
      expect(await (await host.fetch(new Request("http://x/"))).text()).toBe("host");
    } finally {
      await handler.close();
    }
  });

  it("limits web-stream bodies too (no Node request under it): by length and while streaming", async () => {
    const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none", limits: { maxBodyBytes: 1024 } });
    try {
      const post = (body: BodyInit) =>
        handler.fetch(
          new Request("http://x/api/v1/queues/q/messages", {
            method: "POST",
            body,
            headers: { "content-type": "application/octet-stream" },
            duplex: "half",
          } as RequestInit),
        );
      let res = await post(new Uint8Array(1025));
      expect(res.status).toBe(413);
      let sent = 0;
      res = await post(new ReadableStream<Uint8Array>({ pull: (c) => (sent++ < 4 ? c.enqueue(new Uint8Array(512)) : c.close()) }));
      expect(res.status).toBe(413);
      expect(await errorCode(res)).toBe("E_TOO_LARGE");
      res = await post(new ReadableStream<Uint8Array>({ pull: (c) => (sent++ < 6 ? c.enqueue(new Uint8Array(512)) : c.close()) }));
      expect(res.status).toBe(201);
    } finally {
      await handler.close();
    }
  });
});
