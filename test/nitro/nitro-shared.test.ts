// useVQueue().shared / .worker: shared consumers in a Nitro app's server code, on the same
// consumer as the HTTP API (the instance set up directly in Node, as the module's plugin does).
import { afterEach, describe, expect, it } from "vitest";
import { setupVQueue } from "../../adapters/nitro";
import { RateLimitError, type LeasedClientMessage } from "../../client/index";
import type { LeaseResponse, OutcomeEventJSON, OutcomeResponse } from "../../protocol/api";
import { sleep } from "../helpers/sleep";

const instances: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const instance of instances.splice(0)) await instance.close();
});

function instance(name: string, shared: Record<string, unknown> = {}) {
  const vq = setupVQueue(name, { storage: "memory:", durability: "none", shared: shared as never });
  instances.push(vq);
  return vq;
}

describe("useVQueue().shared", () => {
  it("leases from the same consumer as the API: what server code holds, HTTP clients do not get; acks are seen by both", async () => {
    const vq = instance("shared-same");
    await vq.push("jobs", ["a", "b", "c"]);
    const c = vq.shared("jobs", "w");
    const mine = await c.poll({ max: 2, leaseMs: 60_000 });
    expect(mine.map((m) => m.data)).toEqual(["a", "b"]);
    const res = await vq.fetch("/api/v1/queues/jobs/consumers/w/lease", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ max: 10 }),
    });
    expect(res.status).toBe(200);
    const http = (await res.json()) as LeaseResponse;
    expect(http.messages.map((m) => m.data)).toEqual(["c"]);
    // The HTTP client acks in the server: the in-process handle acks its own.
    const ack = await vq.fetch("/api/v1/queues/jobs/consumers/w/ack", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ leases: [http.messages[0]!.lease] }),
    });
    expect(((await ack.json()) as { acked: number }).acked).toBe(1);
    await c.ack(mine[0]!);
    await c.nack(mine[1]!, { deadLetter: true, error: "bad" });
    expect(await c.stats()).toMatchObject({ inFlight: 0, window: 0, deadLettered: 1, ackFloor: { count: 3 } });
    await expect(c.ack(mine[0]!)).resolves.toBeUndefined(); // below the floor: acked already
    await expect(c.extend(mine[1]!)).rejects.toMatchObject({ code: "E_LEASE" });
    // An ordered consumer's name: E_KIND.
    await vq.fetch("/api/v1/queues/jobs/consumers/o/messages");
    await expect(vq.shared("jobs", "o").poll()).rejects.toMatchObject({ code: "E_KIND" });
    await expect(vq.shared("jobs", "bad name").poll()).rejects.toMatchObject({ code: "E_NAME" });
  });
});

describe("useVQueue(): outcomes", () => {
  it("shared() acks with a result and reports progress; worker()'s return value and ctx.progress do the same", async () => {
    const vq = instance("shared-outcomes");
    await vq.push("jobs", ["a", "b"]);
    const c = vq.shared("jobs", "w");
    const [a, b] = await c.poll({ max: 2, leaseMs: 60_000 });
    await c.progress(a!, "half");
    await c.ack(a!, { result: { by: "shared" } });
    await c.nack(b!, { release: true });
    const worker = vq.worker(
      "jobs",
      "w",
      async (m, ctx) => {
        await ctx.progress(1);
        return `done ${m.data as string}`;
      },
      { onError: () => {} },
    );
    const ended = await vq.fetch(`/api/v1/queues/jobs/consumers/w/outcome?part=${b!.part}&offset=${b!.offset}&timeoutMs=20000`);
    expect(((await ended.json()) as OutcomeResponse).outcome).toMatchObject({ kind: "completed", result: "done b" });
    await worker.stop();
    const stream = await vq.fetch("/api/v1/queues/jobs/consumers/w/events?from=oldest");
    const reader = stream.body!.getReader();
    let text = "";
    while ((text.match(/^data:/gm) ?? []).length < 4) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const events = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as OutcomeEventJSON);
    expect(events.map((e) => [e.kind, e.offset, e.progress ?? e.result])).toEqual([
      ["progress", a!.offset, "half"],
      ["completed", a!.offset, { by: "shared" }],
      ["progress", b!.offset, 1],
      ["completed", b!.offset, "done b"],
    ]);
  });
});

describe("useVQueue(): rate limits", () => {
  it("shared().backOff(ms) stops every lease (the API's too); a worker's RateLimitError backs off and gives its message back uncounted", async () => {
    const vq = instance("shared-rate", { limiter: { max: 100, durationMs: 1000 } });
    await vq.push("jobs", ["a", "b"]);
    const c = vq.shared("jobs", "w");
    const until = await c.backOff(60_000);
    expect((await c.stats()).limitedUntil).toBe(until);
    expect(await c.poll({ max: 10 })).toEqual([]);
    const res = await vq.fetch("/api/v1/queues/jobs/consumers/w/lease", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(((await res.json()) as LeaseResponse).messages).toEqual([]);

    const seen: { data: string; deliveries: number }[] = [];
    const worker = vq.worker(
      "jobs",
      "v",
      (m) => {
        seen.push({ data: m.data as string, deliveries: m.deliveries });
        if (seen.length === 1) throw new RateLimitError(60_000);
      },
      { pollTimeoutMs: 100, onError: () => {} },
    );
    while (seen.length === 0) await sleep(10);
    await sleep(300);
    await worker.stop();
    expect(seen).toEqual([{ data: "a", deliveries: 1 }]);
    const v = await vq.shared("jobs", "v").stats();
    expect(v.limitedUntil).toBeGreaterThan(Date.now() + 30_000);
    expect(v).toMatchObject({ inFlight: 0, ready: 2 });
  });
});

describe("useVQueue(): per-group rate limits", () => {
  it("the shared config's groupLimiter holds a group whose window is spent, the others go on", async () => {
    const vq = instance("shared-group-rate", { groupLimiter: { max: 1, durationMs: 60_000 } });
    await vq.produce("jobs", ["a0", "a1"], { group: "A" });
    await vq.produce("jobs", ["b0"], { group: "B" });
    const c = vq.shared("jobs", "w");
    const first = await c.poll({ max: 10 });
    expect(first.map((m) => m.data)).toEqual(["a0", "b0"]);
    for (const m of first) await c.ack(m);
    expect(await c.poll({ max: 10 })).toEqual([]);
  });
});

describe("useVQueue().worker", () => {
  it("runs handlers concurrently, acks on success, nacks with the error and backoff, dead-letters at maxDeliveries, extends long handlers, stops cleanly", async () => {
    // A lease long enough that its extension (half-way) is not late on a loaded machine.
    const vq = instance("shared-worker", { leaseMs: 1000 });
    await vq.push(
      "jobs",
      Array.from({ length: 20 }, (_, i) => `m${i}`),
    );
    const seen = new Map<string, number>();
    let running = 0;
    let most = 0;
    const errors: string[] = [];
    const delays: number[] = [];
    const worker = vq.worker(
      "jobs",
      "w",
      async (m: LeasedClientMessage) => {
        seen.set(m.data as string, (seen.get(m.data as string) ?? 0) + 1);
        running++;
        most = Math.max(most, running);
        // m0 runs past its lease (1 s): extended, so nobody else gets it meanwhile.
        await sleep(m.data === "m0" ? 2500 : 20);
        running--;
        if (m.data === "m5") throw new Error("m5 always fails");
      },
      { concurrency: 4, maxDeliveries: 3, backoff: (n: number) => (delays.push(n), 10), onError: (e: unknown) => errors.push((e as Error).message) },
    );
    const deadline = Date.now() + 20_000; // a wait, not a bound: the checks below say what happened
    while (Date.now() < deadline && (seen.size < 20 || (seen.get("m5") ?? 0) < 3 || worker.stats.running > 0)) await sleep(50);
    await worker.stop();
    await worker.done;
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(1);
    expect(seen.get("m0")).toBe(1);
    expect(seen.get("m5")).toBe(3);
    expect([...seen.entries()].filter(([k, n]) => k !== "m5" && n !== 1)).toEqual([]);
    expect(errors).toEqual(["m5 always fails", "m5 always fails", "m5 always fails"]);
    expect(delays).toEqual([1, 2]);
    expect(worker.stats).toEqual({ processed: 19, failed: 3, deadLettered: 1, running: 0, waiting: 0 });
    const stats = await vq.shared("jobs", "w").stats();
    expect(stats).toMatchObject({ inFlight: 0, window: 0, deadLettered: 1, ackFloor: { count: 20 } });
    const dlq = await vq.fetch("/api/v1/queues/jobs.dead/consumers/look/messages");
    const letter = JSON.parse(((await dlq.json()) as { messages: { data: string }[] }).messages[0]!.data);
    expect(letter).toMatchObject({ origin: { queue: "jobs", consumer: "w" }, deliveries: 3, error: "m5 always fails" });
  });

  it("stop: running handlers finish and are acked, nothing more is leased", async () => {
    const vq = instance("shared-worker-stop");
    await vq.push("jobs", ["a", "b", "c"]);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const started: string[] = [];
    const worker = vq.worker(
      "jobs",
      "w",
      async (m) => {
        started.push(m.data as string);
        await gate;
      },
      { concurrency: 1 },
    );
    while (started.length === 0) await sleep(10);
    const stopped = worker.stop();
    release();
    await stopped;
    expect(started).toEqual(["a"]);
    expect(await vq.shared("jobs", "w").stats()).toMatchObject({ inFlight: 0, ackFloor: { count: 1 } });
    expect((await vq.shared("jobs", "w").poll({ max: 5 })).map((m) => m.data)).toEqual(["b", "c"]);
  });
});

describe("useVQueue().worker before its queue exists, and on a partitioned queue", () => {
  const until = async (done: () => boolean) => {
    const deadline = Date.now() + 15_000;
    while (!done() && Date.now() < deadline) await sleep(20);
  };

  it("waits for a queue that does not exist yet (onError is told), then processes what is pushed to it", async () => {
    const vq = instance("worker-waits");
    const seen: string[] = [];
    const errors: string[] = [];
    const worker = vq.worker("later", "w", (m) => void seen.push(m.data as string), { pollTimeoutMs: 100, onError: (e) => errors.push((e as Error).message) });
    await until(() => errors.length > 0);
    expect(errors[0]).toBe('Queue "later" does not exist.');
    await vq.push(
      "later",
      Array.from({ length: 20 }, (_, i) => `m${i}`),
    );
    await until(() => seen.length === 20);
    await worker.stop();
    await worker.done;
    expect(seen.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`).sort());
    expect(worker.stats).toMatchObject({ processed: 20, failed: 0 });
  });

  it("worker() and shared() consume a partitioned queue: every message once, acks and nacks by partition", async () => {
    const vq = setupVQueue("worker-partitioned", { storage: "memory:", durability: "none", queues: { events: { partitions: 3 } } as never });
    instances.push(vq);
    for (let i = 0; i < 30; i++) await vq.produce("events", `e${i}`, { partitionKey: `k${i % 5}` });
    const shared = vq.shared("events", "s");
    const leased = await shared.poll({ max: 2 });
    expect(leased).toHaveLength(2);
    expect(leased.every((m) => typeof (m as { partition?: number }).partition === "number")).toBe(true);
    // Stats as a plain queue's, summed over the partitions held; the oldest lease names its partition.
    const stats = await shared.stats();
    expect(stats).toMatchObject({ inFlight: 2, oldestUnacked: { deliveries: 1 } });
    expect(leased.map((m) => (m as { partition?: number }).partition)).toContain(stats.oldestUnacked?.partition);
    await shared.ack(leased[0]!);
    await shared.nack(leased[1]!, { delayMs: 0 });
    expect(await shared.stats()).toMatchObject({ inFlight: 0 });

    const seen = new Map<string, number>();
    const worker = vq.worker("events", "w", (m) => void seen.set(m.data as string, (seen.get(m.data as string) ?? 0) + 1), { pollTimeoutMs: 100 });
    await until(() => seen.size === 30);
    await worker.stop();
    await worker.done;
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(seen.size).toBe(30);
    expect(worker.stats).toMatchObject({ processed: 30, failed: 0 });
    // Acked: nothing comes again.
    expect(await vq.shared("events", "w").poll({ max: 10 })).toEqual([]);
  });
});
