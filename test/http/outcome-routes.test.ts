// Outcomes over HTTP (runtime/routes/outcomes.ts, the ack's results and progress in runtime/routes/shared.ts):
// the SSE stream of a shared consumer's events, resuming after a cursor, one message's end, bad inputs.
import { afterEach, describe, expect, it } from "vitest";
import type { AckResponse, LeaseResponse, OutcomeResponse, ProduceResponse } from "../../protocol/api";
import { errorCode, jsonHeaders, startServer, type TestServer } from "./_server";
import { openEvents, type EventReader } from "./_events";

const C = "/api/v1/queues/q/consumers/w";

async function call<T>(s: TestServer, path: string, body: object): Promise<T> {
  const res = await s.post(path, JSON.stringify(body), jsonHeaders);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

const produce = (s: TestServer, messages: unknown[], queue = "q") => s.post(`/api/v1/queues/${queue}/messages`, JSON.stringify({ messages }), jsonHeaders);
const lease = async (s: TestServer, max = 10) => (await call<LeaseResponse>(s, `${C}/lease`, { max, leaseMs: 60_000 })).messages;

const readers: EventReader[] = [];
const events = async (s: TestServer, query = "from=oldest", headers: Record<string, string> = {}) => {
  const reader = await openEvents(`${s.url}${C}/events?${query}`, headers);
  readers.push(reader);
  return reader;
};
afterEach(() => {
  for (const reader of readers.splice(0)) reader.close();
});

describe("outcomes over HTTP", () => {
  it("streams progress, then completed with the ack's result, as server-sent events", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    const [m] = await lease(s);
    const stream = await events(s);
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(await call(s, `${C}/progress`, { lease: m!.lease, progress: { done: 50 } })).toEqual({ ok: true });
    expect(await call<AckResponse>(s, `${C}/ack`, { leases: [m!.lease], results: { [m!.lease]: { total: 42 } } })).toEqual({ acked: 1, errors: [] });

    const first = await stream.next();
    expect(first.frame.event).toBe("progress");
    expect(first.frame.id).toBe(first.outcome.cursor);
    expect(first.outcome).toMatchObject({ kind: "progress", part: 0, offset: 0, seq: 1, deliveries: 1, progress: { done: 50 } });
    const second = await stream.next();
    expect(second.frame.event).toBe("completed");
    expect(second.outcome).toMatchObject({ kind: "completed", part: 0, offset: 0, deliveries: 1, result: { total: 42 } });
    expect(second.outcome.at).toBeGreaterThan(Date.now() - 60_000);
    // The message's end, asked afterwards: at once.
    const res = await s.get(`${C}/outcome?part=0&offset=0`);
    expect(((await res.json()) as OutcomeResponse).outcome).toMatchObject({ kind: "completed", result: { total: 42 } });
  });

  it("streams failed (with its error and when it comes again) and dead", async () => {
    const s = await startServer();
    await produce(s, ["a", "b"]);
    const stream = await events(s, "from=now");
    const [a, b] = await lease(s);
    const before = Date.now();
    await call(s, `${C}/nack`, { leases: [a!.lease], delayMs: 60_000, error: "boom" });
    await call(s, `${C}/nack`, { leases: [b!.lease], deadLetter: true, error: "unusable" });
    const failed = (await stream.next()).outcome;
    expect(failed).toMatchObject({ kind: "failed", offset: a!.offset, error: "boom", deliveries: 1 });
    expect(failed.retryAt).toBeGreaterThanOrEqual(before + 60_000);
    expect(failed.retryAt).toBeLessThanOrEqual(Date.now() + 60_000);
    expect((await stream.next()).outcome).toMatchObject({ kind: "dead", offset: b!.offset, error: "unusable" });
    // Failed is not an end: the first message has none yet; the second's is its death.
    expect(await (await s.get(`${C}/outcome?part=0&offset=${a!.offset}`)).json()).toEqual({ outcome: null });
    expect(((await (await s.get(`${C}/outcome?part=0&offset=${b!.offset}`)).json()) as OutcomeResponse).outcome).toMatchObject({
      kind: "dead",
      error: "unusable",
    });
  });

  it("resumes after Last-Event-ID (or ?after=): no event twice, none missed", async () => {
    const s = await startServer();
    await produce(
      s,
      Array.from({ length: 6 }, (_, i) => `m${i}`),
    );
    const messages = await lease(s);
    const first = await events(s);
    for (const m of messages.slice(0, 3)) await call(s, `${C}/ack`, { leases: [m.lease], results: { [m.lease]: m.data } });
    const seen = [(await first.next()).outcome, (await first.next()).outcome];
    first.close();
    // Meanwhile: the third (sent before), and three more.
    for (const m of messages.slice(3)) await call(s, `${C}/ack`, { leases: [m.lease], results: { [m.lease]: m.data } });
    const resumed = await events(s, "from=oldest", { "last-event-id": seen[1]!.cursor });
    const rest = [...(await resumed.drain(500))];
    expect([...seen, ...rest].map((e) => e.result)).toEqual(["m0", "m1", "m2", "m3", "m4", "m5"]);
    // ?after= too; the header wins over it (EventSource keeps the first URL).
    const byQuery = await events(s, `after=${encodeURIComponent(rest[1]!.cursor)}`);
    expect((await byQuery.drain(500)).map((e) => e.result)).toEqual(["m4", "m5"]);
    const both = await events(s, `after=${encodeURIComponent(seen[0]!.cursor)}`, { "last-event-id": rest[2]!.cursor });
    expect((await both.drain(500)).map((e) => e.result)).toEqual(["m5"]);
  });

  it("from=now sends only what happens after it connected; a comment opens the stream", async () => {
    const s = await startServer();
    await produce(s, ["a", "b"]);
    const [a, b] = await lease(s);
    await call(s, `${C}/ack`, { leases: [a!.lease] });
    const stream = await events(s, "");
    await call(s, `${C}/ack`, { leases: [b!.lease] });
    expect((await stream.next()).outcome).toMatchObject({ kind: "completed", offset: b!.offset });
    // The first frame, a comment, says where "now" was: one event (a's) before it.
    expect(stream.frames[0]).toMatchObject({ comments: [expect.any(String)], id: "1" });
  });

  it("outcome long-polls until the message ends; timeoutMs 0 answers at once", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    const [m] = await lease(s);
    expect(await (await s.get(`${C}/outcome?part=0&offset=0`)).json()).toEqual({ outcome: null });
    const waiting = s.get(`${C}/outcome?part=0&offset=0&timeoutMs=30000`).then((r) => r.json() as Promise<OutcomeResponse>);
    await new Promise((r) => setTimeout(r, 200));
    await call(s, `${C}/ack`, { leases: [m!.lease], results: { [m!.lease]: [1, 2] } });
    expect((await waiting).outcome).toMatchObject({ kind: "completed", part: 0, offset: 0, result: [1, 2] });
  });

  it("a progress of a lease not held is 409 E_LEASE", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    const [m] = await lease(s);
    await call(s, `${C}/ack`, { leases: [m!.lease] });
    const res = await s.post(`${C}/progress`, JSON.stringify({ lease: m!.lease, progress: 1 }), jsonHeaders);
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe("E_LEASE");
  });

  it("refuses bad inputs with 400 saying what is allowed", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    const [m] = await lease(s);
    const bad = async (res: Promise<Response>, code: string, message: RegExp) => {
      const answer = await res;
      expect(answer.status).toBe(400);
      const body = (await answer.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe(code);
      expect(body.error.message).toMatch(message);
    };
    const post = (route: string, body: unknown) => s.post(`${C}/${route}`, JSON.stringify(body), jsonHeaders);
    await bad(post("ack", { leases: [m!.lease], results: { "0.9.9": 1 } }), "E_BODY", /"0\.9\.9" is not one of "leases"/);
    await bad(post("ack", { leases: [m!.lease], results: [1] }), "E_BODY", /an object of a result/);
    await bad(post("ack", { leases: [m!.lease], results: { [m!.lease]: "x".repeat(70_000) } }), "E_BODY", /the limit is 65536/);
    await bad(post("progress", { progress: 1 }), "E_BODY", /Expected "lease"/);
    await bad(post("progress", { lease: "nope", progress: 1 }), "E_BODY", /Invalid lease "nope"/);
    await bad(post("progress", { lease: m!.lease }), "E_BODY", /Expected "progress"/);
    await bad(post("progress", { lease: m!.lease, progress: 1, extra: true }), "E_BODY", /Unknown field "extra"/);
    await bad(s.get(`${C}/outcome?offset=0`), "E_PARAM", /Expected part and offset/);
    await bad(s.get(`${C}/outcome?part=0&offset=-1`), "E_PARAM", /offset/);
    await bad(s.get(`${C}/outcome?part=0&offset=0&timeoutMs=60001`), "E_PARAM", /timeoutMs 60001: use an integer from 0 to 60000/);
    await bad(s.get(`${C}/outcome?part=0&offset=0&partition=1`), "E_PARAM", /not partitioned/);
    await bad(s.get(`${C}/events?from=latest`), "E_PARAM", /use "now" or "oldest"/);
    await bad(s.get(`${C}/events?after=garbage`), "E_PARAM", /after/);
    // The acked message was not acked by any of those.
    expect(await call<AckResponse>(s, `${C}/ack`, { leases: [m!.lease] })).toEqual({ acked: 1, errors: [] });
  });

  it("ends the stream when the server closes, and the close does not wait for the client", async () => {
    const s = await startServer();
    const stream = await events(s);
    await s.close();
    await expect(stream.next(5000)).rejects.toThrow(/the stream ended/);
  });

  it("needs the read right on the queue: 403 without it", async () => {
    const users = [
      { username: "reader", password: "r", read: ["q"], write: false },
      { username: "writer", password: "w", read: false, write: ["q"] },
    ];
    const s = await startServer({ auth: { users } });
    const as = (user: string, password: string) => ({ authorization: `Basic ${btoa(`${user}:${password}`)}` });
    for (const path of [`${C}/events`, `${C}/outcome?part=0&offset=0`]) {
      const refused = await s.get(path, { headers: as("writer", "w") });
      expect(refused.status, path).toBe(403);
      expect(await errorCode(refused)).toBe("E_FORBIDDEN");
    }
    expect(await (await s.get(`${C}/outcome?part=0&offset=0`, { headers: as("reader", "r") })).json()).toEqual({ outcome: null });
    const stream = await events(s, "", as("reader", "r"));
    expect(stream.response.status).toBe(200);
  });

  it("a partitioned queue: events carry their partition; outcome needs it", async () => {
    const s = await startServer();
    const declared = await fetch(`${s.url}/api/v1/queues/q`, { method: "PUT", body: JSON.stringify({ partitions: 2 }), headers: jsonHeaders });
    expect(declared.status).toBe(201);
    const produced = (await (await produce(s, ["a"])).json()) as ProduceResponse;
    const stream = await events(s);
    const [m] = await lease(s);
    expect(m!.partition).toBe(produced.partition);
    await call(s, `${C}/progress`, { lease: m!.lease, progress: "half" });
    await call(s, `${C}/ack`, { leases: [m!.lease], results: { [m!.lease]: "done" } });
    expect((await stream.next()).outcome).toMatchObject({ kind: "progress", partition: produced.partition, progress: "half" });
    expect((await stream.next()).outcome).toMatchObject({ kind: "completed", partition: produced.partition, result: "done" });
    const { part, offset } = produced.first;
    const outcome = await s.get(`${C}/outcome?part=${part}&offset=${offset}&partition=${produced.partition}`);
    expect(((await outcome.json()) as OutcomeResponse).outcome).toMatchObject({ kind: "completed", partition: produced.partition, result: "done" });
    const without = await s.get(`${C}/outcome?part=${part}&offset=${offset}`);
    expect(without.status).toBe(400);
    expect(await errorCode(without)).toBe("E_PARAM");
  });
});
