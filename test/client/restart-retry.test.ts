// The client's retries of the calls that are safe to repeat (produce with its idempotency key,
// ack, nack, extend, commit) through a server restart, a lock held by another process, and a
// busy server's Retry-After; and what it never retries.
import { afterAll, describe, expect, it } from "vitest";
import { createClient, isAbortError, VQueueNetworkError } from "../../client/index";
import { startChild } from "../helpers/spawn";
import { startServer } from "../http/_server";
import { startServerProcess, type ServerProcess } from "./_server-process";
import { sleep } from "../helpers/sleep";

const servers: ServerProcess[] = [];
afterAll(async () => {
  for (const s of servers) await s.remove();
});

/** How many times each body is in the queue (read by a fresh consumer). */
async function counts(baseURL: string, queue: string): Promise<Map<string, number>> {
  const { messages } = await createClient({ baseURL }).consume(queue, "check", { maxMessages: 10_000 });
  const out = new Map<string, number>();
  for (const m of messages) out.set(m.data as string, (out.get(m.data as string) ?? 0) + 1);
  return out;
}

describe("client retries of safe calls", () => {
  it("default options: a server killed and restarted a second later under produce load fails no produce, writes none twice", async () => {
    const server = await startServerProcess({ durability: "fsync" });
    servers.push(server);
    const client = createClient({ baseURL: server.url });
    const total = 300;
    let next = 0;
    const failures: unknown[] = [];
    const producers = Array.from({ length: 6 }, async () => {
      for (let i = next++; i < total; i = next++) await client.produce("orders", `m${i}`).catch((error: unknown) => failures.push(error));
    });
    while (next < 100) await sleep(2);
    await server.restart("SIGKILL", 1000);
    await Promise.all(producers);
    expect(failures).toEqual([]);
    const got = await counts(server.url, "orders");
    expect([...got].filter(([, n]) => n > 1)).toEqual([]);
    expect(got.size).toBe(total);
  }, 90_000);

  it("409 E_LOCKED (another process holds the queue's writer) is retried until it lets go", async () => {
    const s = await startServer();
    const holder = startChild("hold-writer", s.dir, "held");
    try {
      await holder.waitFor((line) => line === "ready");
      // Without retries the server's answer is E_LOCKED: the case the retries are for.
      await expect(createClient({ baseURL: s.url, retryTimeoutMs: 0 }).produce("held", "x")).rejects.toMatchObject({ status: 409, code: "E_LOCKED" });
      const produced = createClient({ baseURL: s.url }).produce("held", "once", { idempotencyKey: "k1" });
      await sleep(1000);
      holder.process.kill("SIGKILL");
      await holder.exited;
      expect(await produced).toMatchObject({ count: 1 });
    } finally {
      holder.process.kill("SIGKILL");
    }
    expect(await counts(s.url, "held")).toEqual(new Map([["once", 1]]));
  }, 30_000);

  it("a 503 with Retry-After: the retry waits that long; 429 too; an error that will not change is not retried", async () => {
    const s = await startServer();
    const sent: number[] = [];
    let busy = 2;
    const busyFirst: typeof fetch = async (input, init) => {
      sent.push(Date.now());
      if (busy-- > 0) {
        const status = busy === 1 ? 503 : 429;
        return new Response(JSON.stringify({ error: { code: status === 503 ? "E_BUSY" : "E_PARAM", message: "busy" } }), {
          status,
          headers: { "content-type": "application/json", "retry-after": "1" },
        });
      }
      return fetch(input, init);
    };
    const client = createClient({ baseURL: s.url, fetch: busyFirst });
    expect(await client.produce("q", "a")).toMatchObject({ count: 1 });
    expect(sent).toHaveLength(3);
    expect(sent[1]! - sent[0]!).toBeGreaterThanOrEqual(1000);
    expect(sent[2]! - sent[1]!).toBeGreaterThanOrEqual(1000);
    // A bad request, the wrong kind of consumer: answered at once, one request each (and the lease between them).
    sent.length = 0;
    await expect(client.produce("q", "x", { partitionKey: "k" })).rejects.toMatchObject({ status: 400 });
    await client.lease("q", "shared");
    await expect(client.commit("q", "shared")).rejects.toMatchObject({ code: "E_KIND" });
    expect(sent).toHaveLength(3);
  });

  it("retryTimeoutMs bounds the retries: a server that stays down fails the produce with the network error after it", async () => {
    const s = await startServer();
    const url = s.url;
    await s.close();
    const started = Date.now();
    const error = await createClient({ baseURL: url, retryTimeoutMs: 3000 })
      .produce("q", "x")
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VQueueNetworkError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    // A caller's abort ends the retries at once.
    const abort = new AbortController();
    const aborted = createClient({ baseURL: url })
      .ack("q", "w", "0.0.1", { signal: abort.signal })
      .catch((e: unknown) => e);
    await sleep(300);
    abort.abort();
    const outcome = await Promise.race([aborted, sleep(5000).then(() => "still retrying")]);
    expect(outcome).not.toBe("still retrying");
    expect(isAbortError(outcome)).toBe(true);
    // Options that would retry without end or spin are refused at once.
    expect(() => createClient({ baseURL: url, retryTimeoutMs: Number.NaN })).toThrow(
      new TypeError("Invalid client option retryTimeoutMs: NaN; it takes a number of ms from 0 up (Infinity: no end)."),
    );
    expect(() => createClient({ baseURL: url, retryDelay: -1 })).toThrow(/option retryDelay: -1; it takes a number of ms above 0/);
    expect(() => createClient({ baseURL: url, produceRetry: 1.5 })).toThrow(/option produceRetry/);
  });

  it("worker(): acks of messages handled while the server is down for longer than the old retries reach it once it is back", async () => {
    const server = await startServerProcess({ durability: "fsync" });
    servers.push(server);
    const client = createClient({ baseURL: server.url });
    await client.produce("jobs", ["a", "b", "c", "d"]);
    const errors: unknown[] = [];
    let started = 0;
    const worker = client.worker(
      "jobs",
      "w",
      async () => {
        started++;
        await sleep(500);
      },
      { concurrency: 4, leaseMs: 60_000, pollTimeoutMs: 500, onError: (e) => errors.push(e) },
    );
    while (started < 4) await sleep(5);
    // Handlers finish while the server is down; their acks wait for it (6 s: past the old 5 attempts).
    await server.restart("SIGKILL", 6000);
    while (worker.stats.processed < 4) await sleep(5);
    await worker.stop();
    expect(errors.filter((e) => /ack failed/.test(String((e as Error).message)))).toEqual([]);
    // The acks went before the next lease: no handler ran twice.
    expect(started).toBe(4);
    // All acked: nothing is handed out again after the restart.
    expect(await client.lease("jobs", "w", { max: 10 })).toEqual([]);
  }, 60_000);
});

describe("what does not wait for the retries", () => {
  it("subscribe: a break while the server is down ends the loop without waiting out retryTimeoutMs (its last commit is one attempt)", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url, retryTimeoutMs: 60_000 });
    await client.produce("q", ["a", "b", "c"]);
    const ended = (async () => {
      for await (const message of client.subscribe("q", "c", { pollTimeoutMs: 200 })) {
        if (message.data === "b") {
          await s.close();
          break;
        }
      }
      return "ended";
    })();
    expect(await Promise.race([ended, sleep(10_000).then(() => "still retrying")])).toBe("ended");
  }, 30_000);
});
