import { describe, expect, it, vi } from "vitest";
import type { OverviewResponse, QueueDetailResponse } from "../../protocol/api";
import { QueueWriter } from "../../src/writer/writer";
import fsDriver from "../../adapters/drivers/fs";
import { basic, jsonHeaders, startServer, type TestServer } from "./_server";
import { sleep } from "../helpers/sleep";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "pathe";

const users = [
  { username: "admin", password: "a" },
  { username: "ordersOnly", password: "o", read: ["orders"], write: ["orders"] },
];

async function overview(s: TestServer, query = "", headers: Record<string, string> = {}): Promise<OverviewResponse> {
  const res = await s.get(`/api/v1/overview${query}`, { headers });
  expect(res.status).toBe(200);
  return (await res.json()) as OverviewResponse;
}

async function detail(s: TestServer, queue: string, query = ""): Promise<QueueDetailResponse> {
  const res = await s.get(`/api/v1/queues/${queue}/overview${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as QueueDetailResponse;
}

/** Consumes up to `max` messages as `consumer` and commits them. */
async function consume(s: TestServer, queue: string, consumer: string, max: number): Promise<void> {
  const res = await s.get(`/api/v1/queues/${queue}/consumers/${consumer}/messages?max_messages=${max}`);
  const { cursor } = (await res.json()) as { cursor: string };
  expect((await s.post(`/api/v1/queues/${queue}/consumers/${consumer}/commit?cursor=${cursor}`)).status).toBe(200);
}

/** Waits until `check` passes on a fresh overview (the monitor samples every `sampleMs`). */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (check(value) || Date.now() > end) return value;
    await sleep(50);
  }
}

describe("GET /api/v1/overview and /api/v1/queues/{queue}/overview", () => {
  it("shows every queue with messages, bytes, parts, rates and the worst lag, and follows what is produced and consumed", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 } });
    await s.post("/api/v1/queues/orders/messages", JSON.stringify({ messages: ["a", "b", "c"] }), jsonHeaders);
    await s.post("/api/v1/queues/logs-2/messages", JSON.stringify({ messages: ["x"] }), jsonHeaders);
    await consume(s, "orders", "fast", 3);
    await consume(s, "orders", "slow", 1);

    let o = await until(
      () => overview(s),
      (o) => o.queues.find((q) => q.name === "orders")?.maxLag === 2,
    );
    expect(o.user).toBeNull();
    expect(o.rights).toEqual(["read", "write", "admin"]);
    expect(o.queues.map((q) => q.name)).toEqual(["logs-2", "orders"]);
    const orders = o.queues.find((q) => q.name === "orders")!;
    expect(orders).toMatchObject({ messages: 3, parts: 1, consumers: 2, maxLag: 2, maxLagConsumer: "slow" });
    expect(orders.bytes).toBeGreaterThan(3);

    // Produced after the first sample: counted, and seen as a rate.
    await s.post("/api/v1/queues/orders/messages", JSON.stringify({ messages: ["d", "e"] }), jsonHeaders);
    o = await until(
      () => overview(s, "?history=50"),
      (o) => o.queues.find((q) => q.name === "orders")?.producedTotal === 2,
    );
    const after = o.queues.find((q) => q.name === "orders")!;
    expect(after).toMatchObject({ messages: 5, producedTotal: 2, maxLag: 4 });
    expect(after.produceRate).toBeGreaterThan(0);
    expect(after.history!.t.length).toBeGreaterThan(1);
    expect(after.history!.t.length).toBe(after.history!.produce!.length);
    expect(after.history!.produce!.some((rate) => rate > 0)).toBe(true);

    const d = await until(
      () => detail(s, "orders", "?history=20"),
      (d) => d.consumers.find((c) => c.name === "fast")?.lag === 2,
    );
    expect(d.parts).toHaveLength(1);
    expect(d.parts[0]).toMatchObject({ id: 0, messages: 5, format: "v2", compressionRatio: null });
    expect(d.parts[0]!.createdAt).toBeGreaterThan(Date.now() - 60_000);
    expect(d.consumers.map((c) => [c.name, c.kind, c.lag])).toEqual([
      ["fast", "ordered", 2],
      ["slow", "ordered", 4],
    ]);
    expect(d.consumers[0]!.lagBytes).toBeGreaterThan(0);
    expect(d.consumers[0]!.lastSeen).toBeGreaterThan(Date.now() - 60_000);
    expect(d.deadLetterQueue).toBeNull();

    // A queue made after the monitor's first sample: all it holds was produced since.
    await s.post("/api/v1/queues/late/messages", JSON.stringify({ messages: ["1", "2", "3"] }), jsonHeaders);
    const late = await until(
      () => overview(s),
      (o) => o.queues.some((q) => q.name === "late" && q.messages === 3),
    );
    expect(late.queues.find((q) => q.name === "late")).toMatchObject({ messages: 3, producedTotal: 3 });

    // Consumed: the counter and the lag follow.
    await consume(s, "orders", "slow", 4);
    const caught = await until(
      () => detail(s, "orders"),
      (d) => d.consumers.find((c) => c.name === "slow")?.consumedTotal === 4,
    );
    expect(caught.consumers.find((c) => c.name === "slow")).toMatchObject({ lag: 0, consumedTotal: 4 });
  });

  it("sees queues written by another process (the crate's way: files only), and says 404 for a queue that does not exist", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 } });
    const writer = await QueueWriter.open("outside", { driver: fsDriver({ dir: s.dir }), durability: "none" });
    await writer.pushBatch(["1", "2"]);
    const seen = await until(
      () => overview(s),
      (o) => o.queues.some((q) => q.name === "outside" && q.messages === 2),
    );
    expect(seen.queues.find((q) => q.name === "outside")?.messages).toBe(2);
    await writer.pushBatch(["3"]);
    const d = await until(
      () => detail(s, "outside"),
      (d) => d.queue.messages === 3,
    );
    expect(d.queue.messages).toBe(3);
    await writer.close();
    expect((await s.get("/api/v1/queues/missing/overview")).status).toBe(404);
    expect((await s.get("/api/v1/overview?history=100001")).status).toBe(400);
    expect((await s.get("/api/v1/overview?history=-1")).status).toBe(400);
  });

  it("samples again when its timer is lost (workerd drops the timers a request set when it ends): a look after two periods waits for a fresh sample", async () => {
    // A stale look waits at most one period for the fresh sample: 500 ms leaves a loaded machine room.
    const s = await startServer({ monitor: { sampleMs: 500 } });
    // The monitor's timers never fire (the others run).
    const real = globalThis.setTimeout;
    const spy = vi
      .spyOn(globalThis, "setTimeout")
      .mockImplementation(((run: () => void, ms?: number) =>
        new Error().stack?.includes("monitor") ? real(() => {}, 0) : real(run, ms)) as typeof setTimeout);
    try {
      expect((await overview(s)).queues).toEqual([]);
      await s.post("/api/v1/queues/late/messages", JSON.stringify({ messages: ["a"] }), jsonHeaders);
      await sleep(1100);
      // No polling: this one look has to see it.
      expect((await overview(s)).queues.map((q) => q.name)).toEqual(["late"]);
    } finally {
      spy.mockRestore();
    }
  });

  it("shows a user only the queues it has rights on, and which rights", async () => {
    const s = await startServer({ auth: { users }, monitor: { sampleMs: 100 } });
    const admin = basic("admin", "a");
    await s.post("/api/v1/queues/orders/messages", JSON.stringify({ message: "a" }), { ...jsonHeaders, ...admin });
    await s.post("/api/v1/queues/secret/messages", JSON.stringify({ message: "b" }), { ...jsonHeaders, ...admin });
    expect((await s.get("/api/v1/overview")).status).toBe(401);
    const all = await until(
      () => overview(s, "", admin),
      (o) => o.queues.length === 2,
    );
    expect(all.queues.map((q) => q.name)).toEqual(["orders", "secret"]);
    const limited = await overview(s, "", basic("ordersOnly", "o"));
    expect(limited.user).toBe("ordersOnly");
    expect(limited.rights).toEqual(["read", "write"]);
    expect(limited.queues.map((q) => [q.name, q.rights])).toEqual([["orders", ["read", "write"]]]);
    expect((await s.get("/api/v1/queues/secret/overview", { headers: basic("ordersOnly", "o") })).status).toBe(403);
  });

  it("shows shared consumers with their leases and links the dead-letter queue", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 }, shared: { maxDeliveries: 1 } });
    await s.post("/api/v1/queues/jobs/messages", JSON.stringify({ messages: ["j1", "j2", "j3"] }), jsonHeaders);
    const lease = await s.post("/api/v1/queues/jobs/consumers/workers/lease", JSON.stringify({ max: 2, leaseMs: 60_000 }), jsonHeaders);
    const leased = (await lease.json()) as { messages: { lease: string }[] };
    expect(leased.messages).toHaveLength(2);
    await s.post("/api/v1/queues/jobs/consumers/workers/nack", JSON.stringify({ leases: [leased.messages[1]!.lease], error: "boom" }), jsonHeaders);
    const d = await until(
      () => detail(s, "jobs"),
      (d) => d.consumers[0]?.inFlight === 1 && d.deadLetterQueue !== null,
    );
    expect(d.consumers[0]).toMatchObject({ name: "workers", kind: "shared", inFlight: 1, deadLettered: 1 });
    expect(d.deadLetterQueue).toBe("jobs.dead");
  });

  it("lists a queue a user may only write to, with nothing of what it holds (no counts, no consumer names)", async () => {
    const s = await startServer({
      auth: { users: [...users, { username: "writer", password: "w", read: false, write: ["orders"], admin: false }] },
      monitor: { sampleMs: 100 },
    });
    const admin = basic("admin", "a");
    await s.post("/api/v1/queues/orders/messages", JSON.stringify({ messages: ["a", "b", "c"] }), { ...jsonHeaders, ...admin });
    await s.get("/api/v1/queues/orders/consumers/billing-secret/messages?max_messages=1", { headers: admin });
    await until(
      () => overview(s, "", admin),
      (o) => o.queues[0]?.consumers === 1,
    );
    const o = await overview(s, "?history=5", basic("writer", "w"));
    expect(o.queues).toEqual([
      {
        name: "orders",
        messages: 0,
        bytes: 0,
        parts: 0,
        consumers: 0,
        produceRate: 0,
        consumeRate: 0,
        maxLag: 0,
        maxLagConsumer: null,
        producedTotal: 0,
        consumedTotal: 0,
        rights: ["write"],
      },
    ]);
    expect(JSON.stringify(o)).not.toContain("billing-secret");
  });

  it("counts a queue deleted and made again on the same part from empty (its counters miss nothing)", async () => {
    const s = await startServer({ monitor: { sampleMs: 100, idleMs: 0 } });
    const produce = (n: number) => s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: Array.from({ length: n }, (_, i) => `m${i}`) }), jsonHeaders);
    // idleMs 0: no sample is scheduled; a look starts one when the last is stale. Samples run one
    // at a time, so the second to end after `since` began after it: it has seen every produce before.
    const total = async () => {
      const since = Date.now();
      const seen = new Set<number>();
      const o = await until(
        () => overview(s),
        (o) => (o.sampledAt > since && seen.add(o.sampledAt), seen.size >= 2),
      );
      expect(seen.size).toBeGreaterThanOrEqual(2);
      return o.queues.find((q) => q.name === "q")?.producedTotal;
    };
    await produce(10);
    await total();
    await produce(5);
    expect(await total()).toBe(5);
    expect((await s.del("/api/v1/queues/q")).status).toBe(200);
    await produce(12);
    expect(await total()).toBe(17);
  });

  it("reads the queues even when listing the storage takes longer than a sample's budget (a loaded machine)", async () => {
    const root = await mkdtemp(join(tmpdir(), "vq-slow-list-"));
    const fs = fsDriver({ dir: root });
    // Listing slower than the budget (20 ms at sampleMs 100): the queue was never read again and its counters stood still.
    const driver = { ...fs, list: async (dir: string) => (await sleep(60), fs.list(dir)) };
    const s = await startServer({ driver, monitor: { sampleMs: 100, idleMs: 0 } });
    try {
      await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["a", "b"] }), jsonHeaders);
      await overview(s);
      await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["c", "d", "e"] }), jsonHeaders);
      const since = Date.now();
      const seen = new Set<number>();
      const o = await until(
        () => overview(s),
        (o) => (o.sampledAt > since && seen.add(o.sampledAt), seen.size >= 2),
      );
      expect(o.queues.find((q) => q.name === "q")).toMatchObject({ messages: 5, producedTotal: 3 });
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });

  it("tells the parts of a queue deleted and made again anew (not the old part 0's age)", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 } });
    const produce = (n: number) =>
      s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: Array.from({ length: n }, (_, i) => `message ${i}`) }), jsonHeaders);
    await produce(3);
    const before = (await detail(s, "q")).parts[0]!;
    expect((await s.del("/api/v1/queues/q")).status).toBe(200);
    await sleep(1100);
    await produce(10);
    const after = await until(
      () => detail(s, "q"),
      (d) => d.parts[0]?.messages === 10,
    );
    expect(after.parts[0]!.createdAt).toBeGreaterThan(before.createdAt! + 1000);
  });
});
