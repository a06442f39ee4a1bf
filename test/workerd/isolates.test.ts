/**
 * Two isolates of one Worker on one Durable Object namespace (Miniflare, two Workers): what a
 * deployed Worker meets, since Cloudflare runs it in many isolates. An ordinary queue is served
 * by one isolate at a time (the other answers 409 E_LOCKED, as another server on the same
 * storage does, until the holder has been idle past its lease); a partitioned queue is served by both, each holding the partitions it uses and
 * handing them over on request.
 */
import type { Miniflare } from "../helpers/tool-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTwoWorkers } from "./_miniflare";
import { sleep } from "../helpers/sleep";

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

  it("an ordinary queue: the isolate that holds its writer serves it, the other answers 409 E_LOCKED until the holder idles past its lease", async () => {
    expect((await a("/api/v1/queues/plain/messages", { method: "POST", body: "from a" })).status).toBe(201);
    const refused = await b("/api/v1/queues/plain/messages", { method: "POST", body: "from b" });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("E_LOCKED");
    // "a" idle: no timer of its renews the lease between requests, so it lapses (LEASE_MS) and "b" may take the queue.
    await sleep(LEASE_MS + 500);
    expect((await b("/api/v1/queues/plain/messages", { method: "POST", body: "from b" })).status).toBe(201);
    const got = (await (await b("/api/v1/queues/plain/consumers/c/messages?max_messages=10&timeout_ms=0")).json()) as { messages: { data: string }[] };
    expect(got.messages.map((m) => m.data)).toEqual(["from a", "from b"]);
    // Now "a" finds its writer's lock taken (QueueWriter.holds): it opens the queue again, and "b" holds it: 409, nothing written twice.
    expect((await a("/api/v1/queues/plain/messages", { method: "POST", body: "again from a" })).status).toBe(409);
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
