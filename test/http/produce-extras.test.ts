import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { serveQueues } from "../../adapters/server";
import { createQueueHandler } from "../../runtime/index";
import { errorCode, jsonHeaders, startServer } from "./_server";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";

const messages = "/api/v1/queues/q/messages";
const consume = "/api/v1/queues/q/consumers/c/messages?max_messages=100";
const bodies = async (res: Response) => ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);

describe("HTTP: delayed produce", () => {
  it("?delayMs= answers 202 with until, and no consumer gets the message before then", async () => {
    const s = await startServer();
    const sent = Date.now();
    // Due well after the next two requests, on a loaded machine too.
    const res = await s.post(`${messages}?delayMs=3000`, "later", { "content-type": "text/plain" });
    expect(res.status).toBe(202);
    const body = (await res.json()) as { queue: string; count: number; delayed: { until: string; untilMs: number } };
    expect(body).toMatchObject({ queue: "q", count: 1 });
    expect(body.delayed.untilMs).toBeGreaterThanOrEqual(sent + 3000);
    expect(Date.parse(body.delayed.until)).toBe(body.delayed.untilMs);
    expect((await s.post(messages, "now", { "content-type": "text/plain" })).status).toBe(201);
    expect(await bodies(await s.get(`${consume}&timeout_ms=300`))).toEqual(["now"]);
    // A long poll waits for it: it comes when due, not before.
    const polled = await s.get(`${consume}&timeout_ms=${WAKE_TIMEOUT_MS}`);
    expect(Date.now()).toBeGreaterThanOrEqual(body.delayed.untilMs);
    expect(await bodies(polled)).toEqual(["later"]);
  });

  it("takes at= (ISO or ms), JSON envelope fields, bytes and batches; refuses bad values with 400 E_PARAM", async () => {
    const s = await startServer();
    // Due times a second apart, from one clock reading: their order does not hang on how long a request takes.
    const base = Date.now();
    const at = new Date(base + 2000).toISOString();
    expect((await s.post(`${messages}?at=${encodeURIComponent(at)}`, new Uint8Array([1, 2]), { "content-type": "application/octet-stream" })).status).toBe(202);
    expect((await s.post(messages, JSON.stringify({ messages: ["j1", "j2"], delayMs: 3000 }), jsonHeaders)).status).toBe(202);
    expect((await s.post(`${messages}?at=${base + 1000}`, "ms", { "content-type": "text/plain" })).status).toBe(202);
    for (const query of ["delayMs=-1", "delayMs=abc", "delayMs=1&delayMs=2", `delayMs=${400 * 24 * 3600 * 1000}`, "at=tomorrow", "at=1&delayMs=1"]) {
      const res = await s.post(`${messages}?${query}`, "x", { "content-type": "text/plain" });
      expect(res.status, query).toBe(400);
      expect(await errorCode(res), query).toBe("E_PARAM");
    }
    for (const envelope of [
      { message: "x", delayMs: "5" },
      { message: "x", delayMs: 1, at: 1 },
      { message: "x", at: "soon" },
    ]) {
      const res = await s.post(messages, JSON.stringify(envelope), jsonHeaders);
      expect(res.status, JSON.stringify(envelope)).toBe(400);
    }
    const got: string[] = [];
    while (got.length < 4) {
      const more = await bodies(await s.get(`${consume}&timeout_ms=${WAKE_TIMEOUT_MS}`));
      expect(more.length, `nothing more came after ${JSON.stringify(got)}`).toBeGreaterThan(0);
      got.push(...more);
    }
    expect(got).toEqual(["ms", "AQI=", "j1", "j2"]);
  });
});

describe("HTTP: delayed messages across a server restart", () => {
  it("a restarted server whose first request is a consume opens the writer, which delivers them when due", async () => {
    const s = await startServer();
    expect((await s.post(`${messages}?delayMs=700`, "after restart", { "content-type": "text/plain" })).status).toBe(202);
    await s.close();
    const again = await serveQueues({ dir: s.dir, port: 0, durability: "none", logger: { error: () => {}, warn: () => {} } });
    try {
      const started = performance.now();
      const res = await fetch(`${again.url}${consume}&timeout_ms=${WAKE_TIMEOUT_MS}`);
      expect(await bodies(res)).toEqual(["after restart"]);
      // The delay's end (700 ms after the produce), not the poll's timeout, ended the wait.
      expectEndedEarly(started);
    } finally {
      await again.close();
    }
  });

  it("a purge closes the writer, yet delayed messages (a purge keeps them) are delivered when due, after a second purge too", async () => {
    const s = await startServer();
    expect((await s.post(messages, "before", { "content-type": "text/plain" })).status).toBe(201);
    expect((await s.post(`${messages}?delayMs=1000`, "later", { "content-type": "text/plain" })).status).toBe(202);
    expect((await s.post("/api/v1/queues/q/purge", undefined)).status).toBe(200);
    expect(await bodies(await s.get(`${consume}&timeout_ms=0`))).toEqual([]);
    expect((await s.post("/api/v1/queues/q/purge", undefined)).status).toBe(200);
    expect(await bodies(await s.get(`${consume}&timeout_ms=4000`))).toEqual(["later"]);
  });

  it("past maxDelayed pending, a delayed produce is answered 507 E_FULL; the queue goes on", async () => {
    const s = await startServer({ maxDelayed: 1 });
    expect((await s.post(`${messages}?delayMs=60000`, "a", { "content-type": "text/plain" })).status).toBe(202);
    const full = await s.post(`${messages}?delayMs=60000`, "b", { "content-type": "text/plain" });
    expect(full.status).toBe(507);
    expect(await errorCode(full)).toBe("E_FULL");
    expect((await s.post(messages, "now", { "content-type": "text/plain" })).status).toBe(201);
  });

  it("server code produces with options through the same writer (QueueHandler.produce)", async () => {
    const handler = createQueueHandler({ driver: memoryDriver(), durability: "none" });
    const first = await handler.produce("q", ["x"], { key: "k" });
    expect(await handler.produce("q", "x", { key: "k" })).toEqual({ ...first, replayed: true });
    expect((await handler.produce("q", "later", { delayMs: 60_000 })).until).toBeGreaterThan(Date.now());
    await expect(handler.produce("q_info_x", "x", {})).rejects.toMatchObject({ code: "E_NAME" });
    await handler.close();
  });
});

describe("HTTP: Idempotency-Key", () => {
  it("a repeated key writes once and answers the first answer with Idempotency-Replayed: true", async () => {
    const s = await startServer();
    const send = (body: string, extra = "") => s.post(`${messages}${extra}`, body, { "content-type": "text/plain", "idempotency-key": "order-17" });
    const first = await send("one");
    expect(first.status).toBe(201);
    expect(first.headers.get("idempotency-replayed")).toBeNull();
    const firstBody = await first.json();
    const again = await Promise.all([send("one"), send("one"), send("another body")]);
    for (const res of again) {
      expect(res.status).toBe(201);
      expect(res.headers.get("idempotency-replayed")).toBe("true");
      expect(await res.json()).toEqual(firstBody);
    }
    const delayed = await s.post(`${messages}?delayMs=60000`, "d", { "idempotency-key": "d-1" });
    expect(delayed.status).toBe(202);
    const replay = await s.post(`${messages}?delayMs=60000`, "d", { "idempotency-key": "d-1" });
    expect(replay.status).toBe(202);
    expect(await replay.json()).toEqual(await delayed.json());
    expect(await bodies(await s.get(`${consume}&timeout_ms=0`))).toEqual(["one"]);
  });

  it("refuses a bad key with 400 E_PARAM", async () => {
    const s = await startServer();
    for (const key of ["x".repeat(256), "tab\tin"]) {
      const res = await s.post(messages, "x", { "idempotency-key": key });
      expect(res.status).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
  });

  it("CORS lets a page send the key and read the replay header; OpenAPI documents both", async () => {
    const s = await startServer({ cors: { origin: "*" } });
    const preflight = await fetch(s.url + messages, {
      method: "OPTIONS",
      headers: { origin: "https://app.example.com", "access-control-request-method": "POST", "access-control-request-headers": "idempotency-key" },
    });
    expect(preflight.headers.get("access-control-allow-headers")).toContain("idempotency-key");
    const res = await s.post(messages, "x", { origin: "https://app.example.com", "idempotency-key": "k" });
    expect(res.headers.get("access-control-expose-headers")).toContain("idempotency-replayed");
    const doc = JSON.stringify(await (await s.get("/api/v1/openapi.json")).json());
    for (const word of ["Idempotency-Key", "delayMs", '"at"', '"202"']) expect(doc).toContain(word);
  });
});
