import { afterAll, describe, expect, it } from "vitest";
import { createClient, VQueueNetworkError } from "../../client/index";
import { VQueueClientError } from "../../client/errors";
import { MAX_RETRY_AFTER_MS, retryDelay } from "../../client/retry";
import { startServer } from "../http/_server";
import { startServerProcess, type ServerProcess } from "./_server-process";
import { sleep } from "../helpers/sleep";

const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.remove();
});

/** Every message body of the queue, in order. */
async function everything(baseURL: string, queue: string): Promise<string[]> {
  const client = createClient({ baseURL });
  const out: string[] = [];
  for (;;) {
    const { messages, cursor } = await client.consume(queue, `check-${Math.random()}`.slice(0, 20), { maxMessages: 10_000 });
    out.push(...messages.map((m) => m.data as string));
    if (!cursor || messages.length < 10_000) return out;
  }
}

describe("client produce retries with an idempotency key", () => {
  it("the first attempt's answer lost after the server wrote it: the retry writes nothing, one message", async () => {
    const s = await startServer();
    const keys: (string | null)[] = [];
    let calls = 0;
    // A network that loses the server's answer of the first request (the server handled it).
    const lossy: typeof fetch = async (input, init) => {
      keys.push(new Headers(init?.headers).get("idempotency-key"));
      const res = await fetch(input, init);
      if (calls++ === 0) {
        await res.arrayBuffer();
        throw new TypeError("fetch failed: connection reset");
      }
      return res;
    };
    const client = createClient({ baseURL: s.url, fetch: lossy, retryDelay: 10 });
    const answer = await client.produce("q", "once");
    expect(answer).toMatchObject({ count: 1, first: { seq: 1 } });
    expect(calls).toBe(2);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(await everything(s.url, "q")).toEqual(["once"]);
    // Two calls are two produces (two keys), even with the same message; a given key is one.
    await createClient({ baseURL: s.url }).produce("q", "once");
    await createClient({ baseURL: s.url }).produce("q", "keyed", { idempotencyKey: "mine" });
    await createClient({ baseURL: s.url }).produce("q", "keyed", { idempotencyKey: "mine" });
    expect(await everything(s.url, "q")).toEqual(["once", "once", "keyed"]);
  });

  it("gives up after produceRetry attempts with the network error; delayed produce and a bad key", async () => {
    const s = await startServer();
    let calls = 0;
    const down: typeof fetch = async () => {
      calls++;
      throw new TypeError("fetch failed");
    };
    await expect(createClient({ baseURL: s.url, fetch: down, retryDelay: 1, produceRetry: 2 }).produce("q", "x")).rejects.toBeInstanceOf(VQueueNetworkError);
    expect(calls).toBe(3);
    const client = createClient({ baseURL: s.url });
    const delayed = await client.produce("q", ["a", "b"], { delayMs: 200 });
    expect(delayed).toMatchObject({ queue: "q", count: 2, delayed: { untilMs: expect.any(Number) } });
    const at = await client.produce("q", "c", { at: new Date(Date.now() + 100) });
    expect(at).toMatchObject({ delayed: {} });
    await expect(client.produce("q", "x", { idempotencyKey: "é" })).rejects.toThrow(/printable ASCII/);
  });

  it("a server killed with SIGKILL and restarted under concurrent producers: every produce resolves, each written once", async () => {
    // fsync: a kill during a write's fsync leaves it written and unanswered, the case a retry would duplicate.
    const server = await startServerProcess({ durability: "fsync" });
    servers.push(server);
    const client = createClient({ baseURL: server.url, retryDelay: 100, timeout: 5000 });
    let next = 0;
    const total = 600;
    const producers = Array.from({ length: 8 }, async () => {
      for (let i = next++; i < total; i = next++) await client.produce("orders", `m${i}`);
    });
    for (const at of [100, 250, 400]) {
      while (next < at) await sleep(2);
      await server.restart("SIGKILL");
    }
    await Promise.all(producers);
    const got = await everything(server.url, "orders");
    const counts = new Map<string, number>();
    for (const body of got) counts.set(body, (counts.get(body) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(counts.size).toBe(total);
  }, 60_000);
});

describe("a Retry-After of hours (a proxy's)", () => {
  it("is waited for at most MAX_RETRY_AFTER_MS, never past what a timer can hold", () => {
    const hours = new VQueueClientError(503, "E_BUSY", "busy", { retryAfterMs: 3_600_000 });
    const wait = retryDelay(hours, 0, 200);
    expect(wait).toBeGreaterThanOrEqual(MAX_RETRY_AFTER_MS);
    expect(wait).toBeLessThanOrEqual(MAX_RETRY_AFTER_MS + 100);
    // A short one is kept as asked.
    expect(retryDelay(new VQueueClientError(503, "E_BUSY", "busy", { retryAfterMs: 1000 }), 0, 200)).toBeLessThanOrEqual(1100);
  });
});
