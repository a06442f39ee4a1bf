// Message attributes over HTTP (runtime/routes/produce.ts): Message-* headers for any body,
// JSON envelope fields, each checked; a shared consumer's lease answer carries the priority.
import { describe, expect, it } from "vitest";
import type { LeaseResponse } from "../../protocol/api";
import { errorCode, jsonHeaders, startServer, type TestServer } from "./_server";

const messages = "/api/v1/queues/q/messages";
const C = "/api/v1/queues/q/consumers/w";
const text = { "content-type": "text/plain" };

async function lease(s: TestServer, body: object): Promise<LeaseResponse> {
  const res = await s.post(`${C}/lease`, JSON.stringify(body), jsonHeaders);
  expect(res.status).toBe(200);
  return (await res.json()) as LeaseResponse;
}

describe("HTTP: message attributes at produce", () => {
  it("Message-Priority on a raw body and priority in the envelope: leased first, the answer says it", async () => {
    const s = await startServer();
    expect((await s.post(messages, JSON.stringify({ messages: ["a", "b", "c"] }), jsonHeaders)).status).toBe(201);
    expect((await s.post(messages, "header-high", { ...text, "message-priority": "7" })).status).toBe(201);
    expect((await s.post(messages, JSON.stringify({ message: "body-mid", priority: 3 }), jsonHeaders)).status).toBe(201);
    const got = await lease(s, { max: 5 });
    expect(got.messages.map((m) => [m.data, m.priority])).toEqual([
      ["header-high", 7],
      ["body-mid", 3],
      ["a", undefined],
      ["b", undefined],
      ["c", undefined],
    ]);
  });

  it("Message-Max-Deliveries and Message-Backoff: dead-lettered at the first failure; a nack without delayMs waits the backoff", async () => {
    const s = await startServer();
    await s.post(messages, "fragile", { ...text, "message-max-deliveries": "1" });
    await s.post(messages, JSON.stringify({ message: "patient", backoff: { type: "fixed", delayMs: 60_000 } }), jsonHeaders);
    await s.post(messages, "plain", text);
    const got = await lease(s, { max: 3 });
    const res = await s.post(`${C}/nack`, JSON.stringify({ leases: got.messages.map((m) => m.lease), error: "boom" }), jsonHeaders);
    expect(res.status).toBe(200);
    // "fragile" is dead, "patient" waits a minute, "plain" comes again at once.
    expect((await lease(s, { max: 3 })).messages.map((m) => m.data)).toEqual(["plain"]);
    const dead = await s.get("/api/v1/queues/q.dead/consumers/look/messages?max_messages=10");
    expect(((await dead.json()) as { messages: unknown[] }).messages).toHaveLength(1);
  });

  it("refuses bad attributes with a 400 that says what is allowed, and writes nothing", async () => {
    const s = await startServer();
    const bad: [Record<string, string>, string | object][] = [
      [{ ...text, "message-priority": "256" }, "x"],
      [{ ...text, "message-priority": "high" }, "x"],
      [{ ...text, "message-max-deliveries": "0" }, "x"],
      [{ ...text, "message-backoff": "linear:5" }, "x"],
      [{ ...text, "message-backoff": "fixed" }, "x"],
      [jsonHeaders, { message: "x", priority: -1 }],
      [jsonHeaders, { message: "x", backoff: { type: "fixed" } }],
      [
        { ...jsonHeaders, "message-priority": "1" },
        { message: "x", priority: 2 },
      ],
    ];
    for (const [headers, body] of bad) {
      const res = await s.post(messages, typeof body === "string" ? body : JSON.stringify(body), headers);
      expect(res.status, JSON.stringify([headers, body])).toBe(400);
      const code = await errorCode(res);
      expect(["E_PARAM", "E_BODY"], JSON.stringify([headers, body])).toContain(code);
    }
    const res = await s.post(messages, "x", { ...text, "message-priority": "300" });
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/0 \(the default\) to 255/);
    // Nothing written: the queue was not even made.
    expect((await s.post(`${C}/lease`, JSON.stringify({ max: 10 }), jsonHeaders)).status).toBe(404);
  });
});
