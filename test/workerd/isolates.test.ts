/**
 * Two isolates of one Worker on one Durable Object namespace (Miniflare, two Workers): what a
 * deployed Worker meets, since Cloudflare runs it in many isolates. Both kinds of queue are
 * served by both isolates: an ordinary queue's writer and consumer go to the isolate that asks
 * (an idle holder, which runs no timer between requests, lets its lease lapse meanwhile); a
 * partitioned queue's partitions are held by the isolate that uses them and handed over on request.
 */
import type { Miniflare } from "../helpers/tool-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTwoWorkers } from "./_miniflare";

/**
 * The driver's lockLeaseMs in both Workers: shorter than its 3 s default, since every hand-over
 * here waits one lease out (workerd runs no timer between requests), yet far above the gap between
 * two requests of one test step, which must find the lease still held.
 */
const LEASE_MS = 1500;

type Fetcher = (path: string, init?: RequestInit) => Promise<Response>;

describe("two isolates on one Durable Object namespace", () => {
  let mf: Miniflare;
  let a: Fetcher;
  let b: Fetcher;

  beforeAll(async () => {
    mf = await startTwoWorkers({ LEASE_MS: String(LEASE_MS) });
    const on = async (name: string): Promise<Fetcher> => {
      const worker = (await mf.getWorker(name)) as unknown as { fetch(url: string, init?: RequestInit): Promise<Response> };
      // Read once: each property read of Miniflare's proxy is a blocking round trip to workerd.
      const fetch = worker.fetch.bind(worker);
      return (path, init) => fetch(`http://x${path}`, init);
    };
    a = await on("a");
    b = await on("b");
  }, 60_000);
  afterAll(async () => {
    await mf?.dispose();
  });

  it("an ordinary queue: both isolates produce and consume it (the writer and the consumer go to the one that asks)", async () => {
    expect((await a("/api/v1/queues/plain/messages", { method: "POST", body: "from a" })).status).toBe(201);
    // "a" idle holds the writer: "b" asks for it, and takes it once the lease of "a" lapses (LEASE_MS).
    expect((await b("/api/v1/queues/plain/messages", { method: "POST", body: "from b" })).status).toBe(201);
    const got = (await (await b("/api/v1/queues/plain/consumers/c/messages?max_messages=10&timeout_ms=0")).json()) as {
      cursor: string;
      messages: { data: string }[];
    };
    expect(got.messages.map((m) => m.data)).toEqual(["from a", "from b"]);
    expect(
      (
        await b("/api/v1/queues/plain/consumers/c/commit", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ cursor: got.cursor }),
        })
      ).status,
    ).toBe(200);
    // Back to "a": its writer's lock was taken (QueueWriter.holds), so it asks "b" for it; nothing written twice.
    expect((await a("/api/v1/queues/plain/messages", { method: "POST", body: "again from a" })).status).toBe(201);
    const rest = (await (await a("/api/v1/queues/plain/consumers/c/messages?max_messages=10&timeout_ms=0")).json()) as { messages: { data: string }[] };
    expect(rest.messages.map((m) => m.data)).toEqual(["again from a"]);
  }, 30_000);

  it("a partitioned queue: produce on both, consume everything on one (it asks the other for its partitions)", async () => {
    const declared = await a("/api/v1/queues/events", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ partitions: 2 }),
    });
    expect(declared.status).toBeLessThan(300);
    const sent: string[] = [];
    for (let i = 0; i < 6; i++) {
      const via = i % 2 === 0 ? a : b;
      const body = `m${i}`;
      const res = await via(`/api/v1/queues/events/messages?partitionKey=k${i}`, { method: "POST", body });
      expect(res.status, await res.clone().text()).toBe(201);
      sent.push(body);
    }
    const got: string[] = [];
    for (let round = 0; round < 20 && got.length < sent.length; round++) {
      const res = await a(`/api/v1/queues/events/consumers/c/messages?max_messages=100&timeout_ms=2000`);
      expect(res.status, await res.clone().text()).toBe(200);
      const batch = (await res.json()) as { cursor: string | null; messages: { data: string }[] };
      got.push(...batch.messages.map((m) => m.data));
      if (batch.cursor)
        expect(
          (
            await a(`/api/v1/queues/events/consumers/c/commit`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ cursor: batch.cursor }),
            })
          ).status,
        ).toBe(200);
    }
    expect(got.sort()).toEqual(sent.sort());
  }, 60_000);
});
