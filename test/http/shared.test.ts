// Shared consumers over HTTP (runtime/routes/shared.ts): lease, ack, nack, extend, redrive, kinds, rights.
import { describe, expect, it } from "vitest";
import type { AckResponse, ConsumerListResponse, ExtendResponse, LeaseResponse, NackResponse, RedriveResponse } from "../../protocol/api";
import { BATCH_CONTENT_TYPE, decodeLeases } from "../../protocol/binary";
import { parseDeadLetter } from "../../src/consumers/shared/dead-letter";
import type { Message } from "../../src/format/message";
import { configProblems } from "../../adapters/config-schema";
import memoryDriver from "../../adapters/drivers/memory";
import { resolveQueueAppOptions } from "../../runtime/options";
import { basic, errorCode, jsonHeaders, startServer, type TestServer } from "./_server";
import { sleep } from "../helpers/sleep";

const C = "/api/v1/queues/q/consumers/w";

async function produce(s: TestServer, messages: unknown[], queue = "q"): Promise<void> {
  const res = await s.post(`/api/v1/queues/${queue}/messages`, JSON.stringify({ messages }), jsonHeaders);
  expect(res.status).toBe(201);
}

async function call<T>(s: TestServer, path: string, body: object, headers: Record<string, string> = {}): Promise<T> {
  const res = await s.post(path, JSON.stringify(body), { ...jsonHeaders, ...headers });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as T;
}

const lease = (s: TestServer, body: object = {}, path = C) => call<LeaseResponse>(s, `${path}/lease`, body);
const ack = (s: TestServer, leases: string[], path = C) => call<AckResponse>(s, `${path}/ack`, { leases });

describe("shared consumers over HTTP", () => {
  it("leases, acks (durably), and an acked message never comes again; the binary answer carries the same leases", async () => {
    const s = await startServer();
    await produce(s, ["a", "b", "c"]);
    const first = await lease(s, { max: 2, leaseMs: 60_000 });
    expect(first.messages.map((m) => m.data)).toEqual(["a", "b"]);
    expect(first.messages[0]).toMatchObject({ part: 0, offset: 0, seq: 1, type: "string", deliveries: 1, lease: expect.stringMatching(/^0\.0\.\d+$/) });
    expect(first.messages[0]!.leaseUntil - first.now).toBeGreaterThan(59_000);
    expect(first.messages[0]!.leaseUntil - first.now).toBeLessThanOrEqual(60_000);
    expect(
      await ack(
        s,
        first.messages.map((m) => m.lease),
      ),
    ).toEqual({ acked: 2, errors: [] });
    const res = await s.post(`${C}/lease`, JSON.stringify({ max: 10 }), { ...jsonHeaders, accept: BATCH_CONTENT_TYPE });
    expect(res.headers.get("content-type")).toBe(BATCH_CONTENT_TYPE);
    const { records } = decodeLeases(new Uint8Array(await res.arrayBuffer()));
    expect(records.map((r) => r.data)).toEqual(["c"]);
    expect(records[0]).toMatchObject({ seq: 3, deliveries: 1 });
    expect(await ack(s, [`${records[0]!.part}.${records[0]!.offset}.${records[0]!.lease}`])).toEqual({ acked: 1, errors: [] });
    expect((await lease(s)).messages).toEqual([]);
    // Acking again is fine (already done); an unknown lease is an error item, not a failed batch.
    const again = await ack(s, [first.messages[0]!.lease, "7.0.1"]);
    expect(again.acked).toBe(1);
    expect(again.errors).toEqual([{ lease: "7.0.1", code: "E_LEASE", message: expect.any(String) }]);
  });

  it("nack with a delay brings it back later with its deliveries counted; extend keeps a lease; a lease that runs out goes to another client", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    const [m] = (await lease(s, { max: 1 })).messages;
    expect(await call<NackResponse>(s, `${C}/nack`, { leases: [m!.lease], delayMs: 1000 })).toEqual({ nacked: 1, errors: [] });
    expect((await lease(s)).messages).toEqual([]); // not due yet: the look comes well within a second at a load of 4
    const back = (await lease(s, { timeoutMs: 5000, leaseMs: 1500 })).messages[0]!;
    expect(back).toMatchObject({ data: "a", deliveries: 2 });
    const extended = await call<ExtendResponse>(s, `${C}/extend`, { leases: [back.lease], leaseMs: 5000 });
    expect(extended.extended[0]!.lease).toBe(back.lease);
    expect(extended.extended[0]!.leaseUntil).toBeGreaterThan(back.leaseUntil + 3000);
    await sleep(400);
    expect((await lease(s)).messages).toEqual([]); // still held
    await call<ExtendResponse>(s, `${C}/extend`, { leases: [back.lease], leaseMs: 100 });
    // Another client's long poll gets it once the lease runs out; the old lease is then refused.
    const other = (await lease(s, { timeoutMs: 3000 })).messages[0]!;
    expect(other).toMatchObject({ data: "a", deliveries: 3 });
    expect(other.lease).not.toBe(back.lease);
    const stale = await call<ExtendResponse>(s, `${C}/extend`, { leases: [back.lease] });
    expect(stale.errors[0]).toMatchObject({ lease: back.lease, code: "E_LEASE" });
  });

  it("two clients polling at once never hold the same message", async () => {
    const s = await startServer();
    await produce(
      s,
      Array.from({ length: 200 }, (_, i) => `m${i}`),
    );
    const seen = new Set<string>();
    const client = async () => {
      for (;;) {
        const { messages } = await lease(s, { max: 7 });
        if (messages.length === 0) return;
        for (const m of messages) {
          expect(seen.has(m.data)).toBe(false);
          seen.add(m.data);
        }
        await ack(
          s,
          messages.map((m) => m.lease),
        );
      }
    };
    await Promise.all([client(), client(), client()]);
    expect(seen.size).toBe(200);
  });

  it("E_KIND both ways: ordered endpoints on a shared consumer, shared ones on an ordered consumer (held or not)", async () => {
    const s = await startServer({ consumerIdleMs: 0 });
    await produce(s, ["a"]);
    await lease(s, { max: 1 });
    for (const [method, path] of [
      ["GET", `${C}/messages`],
      ["POST", `${C}/commit`],
      ["POST", `${C}/rewind`],
    ] as const) {
      const res = await s.get(path, { method });
      expect(res.status, path).toBe(409);
      expect(await errorCode(res)).toBe("E_KIND");
    }
    expect((await s.get("/api/v1/queues/q/consumers/o/messages")).status).toBe(200);
    for (const action of ["lease", "ack", "nack", "extend"]) {
      const res = await s.post(`/api/v1/queues/q/consumers/o/${action}`, JSON.stringify(action === "lease" ? {} : { leases: ["0.0.1"] }), jsonHeaders);
      expect(res.status, action).toBe(409);
      expect(await errorCode(res)).toBe("E_KIND");
    }
    // Not held by the server: the engine's check (the names keep their kind on disk).
    await s.close();
    const s2 = await startServer();
    await produce(s2, ["a"]);
    await s2.get("/api/v1/queues/q/consumers/o/messages");
    await lease(s2, {});
    expect(await errorCode(await s2.post("/api/v1/queues/q/consumers/o/lease", "{}", jsonHeaders))).toBe("E_KIND");
  });

  it("rights: lease needs read on the queue (403 without); redrive needs read on the DLQ and write on the target", async () => {
    const users = [
      { username: "admin", password: "a" },
      { username: "writer", password: "w", read: false, write: true },
      { username: "dlqReader", password: "r", read: ["q.dead"], write: false },
    ];
    const s = await startServer({ auth: { users } });
    const res = await s.post(`${C}/lease`, "{}", { ...jsonHeaders, ...basic("writer", "w") });
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe("E_FORBIDDEN");
    const ackRes = await s.post(`${C}/ack`, JSON.stringify({ leases: ["0.0.1"] }), { ...jsonHeaders, ...basic("writer", "w") });
    expect(ackRes.status).toBe(403);
    const redrive = await s.post("/api/v1/queues/q.dead/redrive", JSON.stringify({ to: "q" }), { ...jsonHeaders, ...basic("dlqReader", "r") });
    expect(redrive.status).toBe(403);
    const redrive2 = await s.post("/api/v1/queues/q.dead/redrive", "{}", { ...jsonHeaders, ...basic("writer", "w") });
    expect(redrive2.status).toBe(403);
  });

  it("maxDeliveries: the message goes to the DLQ with origin and error; nack deadLetter sends at once; redrive brings them back to their origin", async () => {
    const s = await startServer({ shared: { maxDeliveries: 2 } });
    await produce(s, ["a", "b"]);
    for (let i = 0; i < 2; i++) {
      const [m] = (await lease(s, { max: 1 })).messages;
      expect(m!.data).toBe("a");
      await call(s, `${C}/nack`, { leases: [m!.lease], error: `boom ${i}` });
    }
    const [b] = (await lease(s, { max: 1 })).messages;
    expect(b!.data).toBe("b");
    await call(s, `${C}/nack`, { leases: [b!.lease], error: "bad", deadLetter: true });
    const consumers = (await (await s.get("/api/v1/queues/q/consumers")).json()) as ConsumerListResponse;
    expect(consumers.consumers).toEqual([
      expect.objectContaining({ name: "w", kind: "shared", inFlight: 0, redelivered: 1, deadLettered: 2, oldestUnacked: null }),
    ]);
    const dead = (await (await s.get("/api/v1/queues/q.dead/consumers/look/messages?max_messages=10")).json()) as {
      messages: { data: string; type: "string"; part: number; offset: number; seq: number }[];
    };
    const letters = dead.messages.map((m) => parseDeadLetter({ ...m, size: 0 } as unknown as Message)!);
    expect(letters).toEqual([
      expect.objectContaining({ origin: expect.objectContaining({ queue: "q", consumer: "w", seq: 1 }), deliveries: 2, error: "boom 1", data: "a" }),
      expect.objectContaining({ origin: expect.objectContaining({ queue: "q", consumer: "w", seq: 2 }), deliveries: 1, error: "bad", data: "b" }),
    ]);
    expect(await call<RedriveResponse>(s, "/api/v1/queues/q.dead/redrive", {})).toEqual({ moved: 2 });
    expect(await call<RedriveResponse>(s, "/api/v1/queues/q.dead/redrive", {})).toEqual({ moved: 0 });
    const again = (await lease(s, { max: 10 })).messages;
    expect(again.map((m) => [m.data, m.deliveries])).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
  });

  it("checks its input: 400 for bad fields and tokens, 413 for too many leases", async () => {
    const s = await startServer({ limits: { maxMessages: 3 } });
    const bad = async (action: string, body: string, status = 400) => {
      const res = await s.post(`${C}/${action}`, body, jsonHeaders);
      expect(res.status, `${action} ${body}`).toBe(status);
      const body2 = (await res.json()) as { error: { message: string } };
      expect(body2.error.message.length).toBeGreaterThan(10);
    };
    await bad("lease", '{"max": 0}');
    await bad("lease", '{"max": 4}');
    await bad("lease", '{"timeoutMs": 600000}');
    await bad("lease", '{"mx": 1}');
    await bad("lease", "[1]");
    await bad("ack", "{}");
    await bad("ack", '{"leases": ["1.2"]}');
    await bad("ack", '{"leases": ["1.2.3", "1.2.4", "1.2.5", "1.2.6"]}', 413);
    await bad("nack", '{"leases": ["1.2.3"], "delayMs": -1}');
    await bad("nack", '{"leases": ["1.2.3"], "deadLetter": "yes"}');
    await bad("extend", '{"leases": ["1.2.3"], "leaseMs": 0}');
  });

  it("a lease answer stops adding messages past limits.maxResponseBytes (at least one goes); the rest wait for the next lease, uncounted", async () => {
    const s = await startServer({ limits: { maxResponseBytes: 250 } });
    await produce(s, ["a".repeat(100), "b".repeat(100), "c".repeat(100), "d".repeat(300)]);
    expect((await lease(s, { max: 10, leaseMs: 60_000 })).messages.map((m) => m.data[0])).toEqual(["a", "b"]);
    expect((await lease(s, { max: 10, leaseMs: 60_000 })).messages.map((m) => m.data[0])).toEqual(["c"]);
    expect((await lease(s, { max: 10, leaseMs: 60_000 })).messages.map((m) => [m.data[0], m.deliveries])).toEqual([["d", 1]]);
  });

  it("a long poll ends when the client goes away, and what it would have leased goes to the next one at once", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    await ack(
      s,
      (await lease(s)).messages.map((m) => m.lease),
    );
    const abort = new AbortController();
    const pending = fetch(`${s.url}${C}/lease`, {
      method: "POST",
      body: JSON.stringify({ timeoutMs: 5000 }),
      headers: jsonHeaders,
      signal: abort.signal,
    }).catch(() => "aborted");
    await sleep(200);
    abort.abort();
    expect(await pending).toBe("aborted");
    await sleep(300);
    await produce(s, ["x"]);
    expect((await lease(s, { timeoutMs: 1000 })).messages.map((m) => m.data)).toEqual(["x"]);
  });

  it("a restart redelivers every unacked message and never an acked one; purge and delete close the held consumer", async () => {
    const s = await startServer();
    await produce(s, ["a", "b", "c", "d"]);
    const got = (await lease(s, { max: 4 })).messages;
    await ack(s, [got[1]!.lease, got[3]!.lease]);
    await s.close();
    const s2 = await startServer({ dir: s.dir });
    const again = (await lease(s2, { max: 10 })).messages;
    expect(again.map((m) => [m.data, m.deliveries])).toEqual([
      ["a", 2],
      ["c", 2],
    ]);
    // Held with leases running: a purge closes it first (not E_LOCKED), and the queue starts over.
    expect((await s2.post("/api/v1/queues/q/purge")).status).toBe(200);
    await produce(s2, ["e"]);
    expect((await lease(s2)).messages.map((m) => m.data)).toEqual(["e"]);
    expect((await s2.del("/api/v1/queues/q")).status).toBe(200);
  });

  it("the server holds a shared consumer while it has leases running, closes it once idle, and counts it toward maxConsumers", async () => {
    const s = await startServer({ consumerIdleMs: 200, maxConsumers: 1 });
    await produce(s, ["a"]);
    const held = async () => ((await (await s.get("/api/v1/queues/q/consumers")).json()) as ConsumerListResponse).consumers.find((c) => c.name === "w");
    const [m] = (await lease(s, { leaseMs: 60_000 })).messages;
    await sleep(1500);
    expect(await held()).toMatchObject({ kind: "shared", inFlight: 1, oldestUnacked: { seq: 1 } }); // not closed: a lease runs
    // The one consumer slot is in use: another consumer (of either kind) waits for room, 503.
    const busy = await s.get("/api/v1/queues/q/consumers/o/messages");
    expect(busy.status).toBe(503);
    expect(await errorCode(busy)).toBe("E_BUSY");
    await ack(s, [m!.lease]);
    await sleep(1500);
    const after = await held();
    expect(after).toMatchObject({ kind: "shared" });
    expect(after).not.toHaveProperty("inFlight"); // closed as idle: no live stats
    expect((await s.get("/api/v1/queues/q/consumers/o/messages")).status).toBe(200);
  });

  it("deleting a held shared consumer ends its parked lease polls with 404 and removes its state; the name can then be ordered", async () => {
    const s = await startServer();
    await produce(s, ["a"]);
    await ack(
      s,
      (await lease(s)).messages.map((m) => m.lease),
    );
    const parked = s.post(`${C}/lease`, JSON.stringify({ timeoutMs: 10_000 }), jsonHeaders);
    await sleep(200);
    expect((await s.del(C)).status).toBe(200);
    const res = await parked;
    expect(res.status).toBe(404);
    expect(await errorCode(res)).toBe("E_NOT_FOUND");
    expect((await s.get(`${C}/messages?max_messages=5`)).status).toBe(200);
  });

  it("server config: shared defaults and per-queue shared settings, checked with clear errors; a queue's shared settings are laid over the defaults", () => {
    const driver = memoryDriver();
    const options = resolveQueueAppOptions({ driver, shared: { maxDeliveries: 3, leaseMs: 1000 }, queues: { q: { shared: { leaseMs: 5 } } } });
    expect(options.sharedFor("q")).toEqual({ maxDeliveries: 3, leaseMs: 5 });
    expect(options.sharedFor("other")).toEqual({ maxDeliveries: 3, leaseMs: 1000 });
    expect(() => resolveQueueAppOptions({ driver, shared: { leaseMs: 0 } })).toThrow(/Invalid shared.leaseMs 0: use an integer from 1/);
    expect(configProblems({ shared: { maxDeliverys: 3, deadLetterQueue: "a/b" }, queues: { q: { shared: { maxInFlight: -1 } } } })).toEqual([
      expect.stringMatching(/Unknown key "shared.maxDeliverys": use leaseMs, maxInFlight/),
      expect.stringMatching(/Invalid shared.deadLetterQueue "a\/b": use a queue name/),
      expect.stringMatching(/Invalid queues.q.shared.maxInFlight -1/),
    ]);
    expect(configProblems({ shared: { limiter: { max: 0, durationMs: 1000 } }, queues: { q: { shared: { limiter: { max: 5, per: "1s" } } } } })).toEqual([
      "Invalid shared.limiter.max 0: use an integer from 1 to 1000000.",
      'Unknown key "queues.q.shared.limiter.per": use max and durationMs.',
    ]);
    expect(configProblems({ shared: { groupLimiter: { max: 5, durationMs: 0 } }, queues: { q: { shared: { groupLimiter: 5 } } } })).toEqual([
      "Invalid shared.groupLimiter.durationMs 0: use an integer from 1 to 2147483647.",
      expect.stringMatching(/^Invalid queues.q.shared.groupLimiter 5: expected an object/),
    ]);
    expect(
      configProblems({ shared: { outcomes: { keep: 0, keepMs: 500 } }, queues: { q: { shared: { outcomes: "yes" } }, r: { shared: { outcomes: false } } } }),
    ).toEqual([
      "Invalid shared.outcomes.keep 0: use an integer from 1 to 10000000. Invalid shared.outcomes.keepMs 500: use an integer from 1000 to 315360000000.",
      expect.stringMatching(/^Invalid queues.q.shared.outcomes "yes": expected false \(keep none\) or an object/),
    ]);
  });

  it("server config queues.<q>.shared.groupLimiter: at most max leases of a group in the window, while the other groups go on", async () => {
    const s = await startServer({ queues: { q: { shared: { groupLimiter: { max: 2, durationMs: 60_000 } } } } });
    for (const [group, messages] of [
      ["A", ["a0", "a1", "a2"]],
      ["B", ["b0", "b1"]],
    ] as const) {
      const res = await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages, group }), jsonHeaders);
      expect(res.status).toBe(201);
    }
    const leased: string[] = [];
    for (let round = 0; round < 2; round++) {
      const { messages } = await lease(s, { max: 10 });
      leased.push(...messages.map((m) => m.data as string));
      await ack(
        s,
        messages.map((m) => m.lease),
      );
    }
    expect(leased).toEqual(["a0", "b0", "a1", "b1"]);
    // Both groups spent their window: nothing now (and a2 stays first in line for its group).
    expect((await lease(s, { max: 10, timeoutMs: 0 })).messages).toEqual([]);
    await produce(s, ["plain"]);
    expect((await lease(s, { max: 10 })).messages.map((m) => m.data)).toEqual(["plain"]);
  });
});
