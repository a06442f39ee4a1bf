// The client's shared-consumer calls and worker() against a real server on loopback.
import { describe, expect, it } from "vitest";
import { createClient, type LeasedClientMessage } from "../../client/index";
import { parseDeadLetter } from "../../src/consumers/shared/dead-letter";
import type { Message } from "../../src/format/message";
import { until } from "./_until";
import { startServer, type TestServer } from "../http/_server";
import { startServerProcess } from "./_server-process";
import { sleep } from "../helpers/sleep";

const clientOf = (s: TestServer) => createClient({ baseURL: s.url });
const quiet = { onError: () => {} };

async function fill(s: TestServer, count: number, queue = "q"): Promise<string[]> {
  const bodies = Array.from({ length: count }, (_, i) => `m${i}`);
  await clientOf(s).produce(queue, bodies);
  return bodies;
}

describe("client: shared consumers", () => {
  it("lease (text, JSON, bytes), ack, nack, extend and redrive", async () => {
    const s = await startServer();
    const client = clientOf(s);
    await client.produce("q", [{ id: 1 }, "not json {", Uint8Array.from([0, 255])]);
    const got = await client.lease<{ id: number }>("q", "w", { max: 10, json: true, leaseMs: 10_000 });
    expect(got.map((m) => m.data)).toEqual([{ id: 1 }, "not json {", Uint8Array.from([0, 255])]);
    expect(got[1]).toMatchObject({ json: false, error: expect.any(SyntaxError) });
    expect(got[0]).toMatchObject({ part: 0, seq: 1, deliveries: 1, lease: expect.stringMatching(/^0\.0\.\d+$/) });
    expect(got[0]).not.toHaveProperty("cursor");
    expect(await client.ack("q", "w", got[0]!.lease)).toEqual({ acked: 1, errors: [] });
    const ext = await client.extend("q", "w", [got[1]!.lease], { leaseMs: 20_000 });
    expect(ext.extended).toEqual([{ lease: got[1]!.lease, leaseUntil: expect.any(Number) }]);
    expect(await client.nack("q", "w", [got[1]!.lease, got[2]!.lease], { deadLetter: true, error: "unusable" })).toEqual({ nacked: 2, errors: [] });
    expect(await client.lease("q", "w")).toEqual([]);
    expect(await client.redrive("q.dead")).toEqual({ moved: 2 });
    const back = await client.lease("q", "w", { max: 10 });
    expect(back.map((m) => m.data)).toEqual(['"not json {"'.slice(1, -1), Uint8Array.from([0, 255])]);
    // The other kind's calls on this name: E_KIND.
    await expect(client.consume("q", "w")).rejects.toMatchObject({ status: 409, code: "E_KIND" });
  });

  it("worker(): every message handled once, never more than `concurrency` at a time", async () => {
    const s = await startServer();
    const bodies = await fill(s, 60);
    const seen: string[] = [];
    let running = 0;
    let most = 0;
    const worker = clientOf(s).worker(
      "q",
      "w",
      async (m) => {
        most = Math.max(most, ++running);
        await sleep(5);
        seen.push(m.data as string);
        running--;
      },
      { concurrency: 3, batch: 10, ...quiet },
    );
    await until(() => seen.length === 60);
    await worker.stop();
    await worker.done;
    expect(most).toBe(3);
    expect(seen.sort()).toEqual(bodies.sort());
    expect(worker.stats).toMatchObject({ processed: 60, failed: 0, running: 0, waiting: 0 });
    // All acked: nothing comes again, now or after the leases would have run out.
    expect(await clientOf(s).lease("q", "w", { max: 100 })).toEqual([]);
  });

  it("worker() on a partitioned queue: every message handled once, each with its partition, all acked", async () => {
    const s = await startServer({ queues: { parts: { partitions: 4 } } });
    const client = clientOf(s);
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`);
    for (const body of bodies) await client.produce("parts", [body], { partitionKey: body });
    const seen: [string, number | undefined][] = [];
    const worker = client.worker("parts", "w", async (m) => void seen.push([m.data as string, m.partition]), { concurrency: 4, batch: 10, ...quiet });
    await until(() => seen.length === 40);
    await worker.stop();
    await worker.done;
    expect(seen.map(([body]) => body).sort()).toEqual([...bodies].sort());
    expect(seen.every(([, partition]) => Number.isInteger(partition) && partition! >= 0 && partition! < 4)).toBe(true);
    expect(worker.stats).toMatchObject({ processed: 40, failed: 0 });
    // All acked (the tokens named their partitions): nothing comes again.
    expect(await client.lease("parts", "w", { max: 100 })).toEqual([]);
  });

  it("worker(): a throw is nacked with its error and retried after the backoff; maxDeliveries sends it to the DLQ", async () => {
    const s = await startServer();
    await fill(s, 3);
    const deliveries = new Map<string, number[]>();
    const errors: unknown[] = [];
    const worker = clientOf(s).worker(
      "q",
      "w",
      (m) => {
        deliveries.set(m.data as string, [...(deliveries.get(m.data as string) ?? []), m.deliveries]);
        if (m.data === "m1" && m.deliveries < 2) throw new Error("flaky");
        if (m.data === "m2") throw new Error("always broken");
      },
      { concurrency: 2, maxDeliveries: 3, backoff: () => 50, onError: (e) => errors.push(e) },
    );
    await until(() => worker.stats.deadLettered === 1 && worker.stats.processed === 2);
    await worker.stop();
    expect(deliveries.get("m0")).toEqual([1]);
    expect(deliveries.get("m1")).toEqual([1, 2]);
    expect(deliveries.get("m2")).toEqual([1, 2, 3]);
    expect(errors.map((e) => (e as Error).message)).toEqual(expect.arrayContaining(["flaky", "always broken"]));
    const dead = await clientOf(s).consume("q.dead", "look", { maxMessages: 10 });
    expect(dead.messages).toHaveLength(1);
    expect(parseDeadLetter(dead.messages[0] as unknown as Message)).toMatchObject({
      origin: { queue: "q", consumer: "w" },
      deliveries: 3,
      error: "always broken",
      data: "m2",
    });
  });

  it("worker(): a handler longer than the lease keeps it (extended); nobody else gets the message meanwhile", async () => {
    const s = await startServer();
    await fill(s, 1);
    const handled: LeasedClientMessage[] = [];
    let began!: () => void;
    const handling = new Promise<void>((resolve) => (began = resolve));
    const worker = clientOf(s).worker(
      "q",
      "w",
      async (m) => {
        began();
        // Three leases long: extended twice (each past half its time). A lease of 1 s leaves the
        // extend half a second to land on a loaded machine.
        await sleep(3000);
        handled.push(m);
      },
      { leaseMs: 1000, ...quiet },
    );
    // The worker leased it first (the other client's lease could otherwise reach the server first).
    await handling;
    const other = clientOf(s);
    const stolen: unknown[] = [];
    // Another client asks all along the handler's run.
    while (handled.length === 0) stolen.push(...(await other.lease("q", "w", { max: 10, timeoutMs: 200 })));
    await worker.stop();
    expect(stolen).toEqual([]);
    // Handled once: never handed to this worker again either.
    expect(handled).toHaveLength(1);
    expect(handled[0]!.deliveries).toBe(1);
    await sleep(500);
    expect(await other.lease("q", "w")).toEqual([]);
  });

  it("worker(): a message leased late in a long poll longer than its lease is handled, not dropped as expired", async () => {
    const s = await startServer();
    {
      const client = clientOf(s);
      await client.produce("q", ["warm"]);
      const handled: string[] = [];
      const worker = client.worker("q", "w", (m) => void handled.push(String(m.data)), { leaseMs: 1000, pollTimeoutMs: 5000, ...quiet });
      await sleep(1800); // the next long poll has waited longer than a lease
      await client.produce("q", ["late"]);
      for (let i = 0; i < 60 && handled.length < 2; i++) await sleep(50);
      await worker.stop();
      expect(handled).toEqual(["warm", "late"]);
      const [w] = (await client.consumers("q")).consumers;
      expect(w!.redelivered ?? 0).toBe(0);
    }
  }, 20_000);

  it("worker(): stop() lets running handlers finish and acks them, gives back what waits at once, leases nothing more", async () => {
    const s = await startServer();
    await fill(s, 20);
    const started: string[] = [];
    const finished: string[] = [];
    const worker = clientOf(s).worker(
      "q",
      "w",
      async (m) => {
        started.push(m.data as string);
        await sleep(300);
        finished.push(m.data as string);
      },
      { concurrency: 2, batch: 20, leaseMs: 60_000, ...quiet },
    );
    await until(() => started.length === 2);
    await worker.stop();
    expect(finished.sort()).toEqual(started.sort());
    expect(worker.stats).toMatchObject({ processed: 2, running: 0, waiting: 0 });
    // The 18 that waited are back at once (not after the 60 s lease); the 2 done never come again.
    const rest = await clientOf(s).lease("q", "w", { max: 100 });
    expect(rest).toHaveLength(18);
    expect(rest.map((m) => m.data)).not.toContain(started[0]);
    expect(rest.map((m) => m.data)).not.toContain(started[1]);
  });

  it("worker(): an abort signal stops it the same way, and done resolves", async () => {
    const s = await startServer();
    await fill(s, 5);
    const abort = new AbortController();
    let count = 0;
    const worker = clientOf(s).worker("q", "w", () => void count++, { signal: abort.signal, ...quiet });
    await until(() => count === 5);
    abort.abort();
    await worker.done;
    expect(worker.stats.processed).toBe(5);
    expect(await clientOf(s).lease("q", "w")).toEqual([]);
  });

  it("worker(): with fast handlers a second lease request overlaps the first; with slow ones only one is asked at a time", async () => {
    const s = await startServer();
    await fill(s, 3000);
    const track = () => {
      const t = { now: 0, most: 0 };
      const fetch: typeof globalThis.fetch = async (input, init) => {
        const lease = String(input instanceof Request ? input.url : input).endsWith("/lease");
        if (lease) t.most = Math.max(t.most, ++t.now);
        try {
          return await globalThis.fetch(input, init);
        } finally {
          if (lease) t.now--;
        }
      };
      return { t, client: createClient({ baseURL: s.url, fetch }) };
    };
    const fast = track();
    let handled = 0;
    const w = fast.client.worker("q", "fast", () => void handled++, { batch: 50, ...quiet });
    await until(() => handled === 3000);
    await w.stop();
    expect(fast.t.most).toBe(2);

    const slow = track();
    let started = 0;
    const ws = slow.client.worker("q", "slow", () => (started++, sleep(30)), { concurrency: 2, batch: 10, ...quiet });
    await until(() => started >= 20);
    await ws.stop();
    expect(slow.t.most).toBe(1);
    await s.close();
  });

  it("worker(): rides out a server restart (network errors retried), and rejects done on an error it cannot recover from", async () => {
    const s = await startServer();
    await fill(s, 3);
    const seen: string[] = [];
    const worker = clientOf(s).worker("q", "w", (m) => void seen.push(m.data as string), { pollTimeoutMs: 200, ...quiet });
    await until(() => seen.length === 3);
    await sleep(100); // the acks go out (batched) and are durable
    await s.close();
    await sleep(300);
    const s2 = await startServer({ dir: s.dir, port: s.port });
    await clientOf(s2).produce("q", ["after"]);
    await until(() => seen.includes("after"), 10_000);
    await worker.stop();
    expect(seen.sort()).toEqual(["after", "m0", "m1", "m2"]);
    // An ordered consumer's name: E_KIND, not retried.
    await clientOf(s2).consume("q", "o");
    const wrong = clientOf(s2).worker("q", "o", () => {}, quiet);
    await expect(wrong.done).rejects.toMatchObject({ code: "E_KIND" });
  });

  it("a server killed (SIGKILL) and restarted redelivers every unacked message, with its count, and never an acked one", async () => {
    const server = await startServerProcess();
    try {
      const client = createClient({ baseURL: server.url });
      await client.produce("q", ["a", "b", "c", "d", "e"]);
      const got = await client.lease("q", "w", { max: 5, leaseMs: 60_000 });
      expect(await client.ack("q", "w", [got[0]!.lease, got[2]!.lease, got[4]!.lease])).toEqual({ acked: 3, errors: [] });
      await server.restart("SIGKILL");
      const again = await client.lease("q", "w", { max: 10 });
      expect(again.map((m) => [m.data, m.deliveries])).toEqual([
        ["b", 2],
        ["d", 2],
      ]);
      await client.ack(
        "q",
        "w",
        again.map((m) => m.lease),
      );
      await server.restart("SIGKILL");
      expect(await client.lease("q", "w", { max: 10 })).toEqual([]);
    } finally {
      await server.remove();
    }
  }, 30_000);
});
