// Rate limits and back-offs of shared consumers over HTTP: the server's `shared.limiter`, the
// backoff route, and worker()'s `ctx.rateLimit(ms)` / `RateLimitError`, against a real server on loopback.
import { describe, expect, it } from "vitest";
import { createClient, RateLimitError, type LeasedClientMessage } from "../../client/index";
import { startServer, jsonHeaders, type TestServer } from "../http/_server";
import { handedOutAt, mostInAnyWindow } from "../helpers/rate";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";
import { until } from "./_until";

const LEASE_MS = 600_000;
const quiet = { onError: () => {} };
const clientOf = (s: TestServer) => createClient({ baseURL: s.url });

/** Each hand-out time (the server's clock) and body of messages handled by workers. */
type Seen = { at: number; data: string; deliveries: number };
const seenOf = (m: LeasedClientMessage): Seen => ({ at: handedOutAt(m, LEASE_MS), data: m.data as string, deliveries: m.deliveries });

/** The longest stretch (ms) between two hand-outs from `from` on: while hungry workers got nothing. */
function longestGap(times: number[], from: number): number {
  const after = [from, ...times.filter((t) => t > from)].sort((a, b) => a - b);
  return Math.max(0, ...after.slice(1).map((t, i) => t - after[i]!));
}

describe("rate limits over HTTP", () => {
  it("the server's shared.limiter: workers together never get more than max in any durationMs", async () => {
    const s = await startServer({ shared: { limiter: { max: 10, durationMs: 400 } } });
    const client = clientOf(s);
    await client.produce(
      "q",
      Array.from({ length: 50 }, (_, i) => `m${i}`),
    );
    const seen: Seen[] = [];
    const handle = (m: LeasedClientMessage) => void seen.push(seenOf(m));
    const workers = [1, 2, 3].map(() => client.worker("q", "w", handle, { concurrency: 4, leaseMs: LEASE_MS, ...quiet }));
    await until(() => seen.length === 50, 60_000);
    await Promise.all(workers.map((w) => w.stop()));
    expect(new Set(seen.map((m) => m.data)).size).toBe(50);
    expect(
      mostInAnyWindow(
        seen.map((m) => m.at),
        400,
      ),
    ).toBe(10);
  }, 90_000);

  it("a partitioned queue: each partition's share of max (the shares add up to it); backoff stops every partition", async () => {
    const s = await startServer({ shared: { limiter: { max: 4, durationMs: 600_000 } } });
    const client = clientOf(s);
    await client.declare("p", { partitions: 2 });
    for (let i = 0; i < 40; i++) await client.produce("p", [`m${i}`], { partitionKey: `k${i}` });
    const got = [...(await client.lease("p", "w", { max: 100 })), ...(await client.lease("p", "w", { max: 100 }))];
    expect(got).toHaveLength(4);
    expect(new Set(got.map((m) => m.partition))).toEqual(new Set([0, 1]));
    expect(await client.lease("p", "w", { max: 100, timeoutMs: 200 })).toEqual([]);
    const { limitedUntil } = await client.backOff("p", "v", 600_000);
    expect(limitedUntil).toBeGreaterThan(Date.now() + 300_000);
    expect(await client.lease("p", "v", { max: 100, timeoutMs: 200 })).toEqual([]);
  }, 60_000);

  it("POST .../backoff: no lease to anyone until then (a long poll waits for it, then gets the message); bad input is a clear 400", async () => {
    const s = await startServer();
    const client = clientOf(s);
    await client.produce("q", ["a"]);
    const { limitedUntil } = await client.backOff("q", "w", 500);
    expect(limitedUntil).toBeGreaterThan(Date.now() - 1000);
    expect(await client.lease("q", "w", { max: 1 })).toEqual([]);
    const consumers = (await (await s.get("/api/v1/queues/q/consumers")).json()) as { consumers: { name: string; limitedUntil?: number }[] };
    expect(consumers.consumers.find((c) => c.name === "w")?.limitedUntil).toBe(limitedUntil);
    const started = performance.now();
    const [a] = await client.lease("q", "w", { max: 1, timeoutMs: WAKE_TIMEOUT_MS, leaseMs: LEASE_MS });
    expectEndedEarly(started);
    expect(a?.data).toBe("a");
    expect(handedOutAt(a!, LEASE_MS)).toBeGreaterThanOrEqual(limitedUntil);

    const bad = async (body: string) => {
      const res = await s.post("/api/v1/queues/q/consumers/w/backoff", body, jsonHeaders);
      return { status: res.status, ...((await res.json()) as { error: { code: string; message: string } }).error };
    };
    expect(await bad("{}")).toMatchObject({ status: 400, code: "E_BODY", message: expect.stringContaining('Expected "delayMs"') });
    expect(await bad('{"delayMs":-5}')).toMatchObject({ status: 400, message: expect.stringContaining("Invalid delayMs -5: use an integer from 0 to") });
    expect(await bad('{"delayMs":5,"ms":1}')).toMatchObject({ status: 400, message: expect.stringContaining('Unknown field "ms"') });
  }, 60_000);

  it("worker(): a handler that throws RateLimitError(ms) pauses every worker of the consumer; its message comes back uncounted", async () => {
    const s = await startServer();
    const client = clientOf(s);
    await client.produce(
      "q",
      Array.from({ length: 40 }, (_, i) => `m${i}`),
    );
    const delayMs = 3000;
    const seen: Seen[] = [];
    let limitedAt: number | undefined;
    let failed = 0;
    const handle = async (m: LeasedClientMessage) => {
      seen.push(seenOf(m));
      await sleep(5);
      if (m.data === "m5" && limitedAt === undefined) {
        limitedAt = handedOutAt(m, LEASE_MS);
        throw new RateLimitError(delayMs);
      }
    };
    const options = { concurrency: 2, batch: 2, leaseMs: LEASE_MS, onError: () => void failed++ };
    const workers = [client.worker("q", "w", handle, options), createClient({ baseURL: s.url }).worker("q", "w", handle, options)];
    await until(() => new Set(seen.map((m) => m.data)).size === 40 && seen.filter((m) => m.data === "m5").length === 2, 60_000);
    await Promise.all(workers.map((w) => w.stop()));
    expect(failed).toBe(0);
    expect(workers.map((w) => w.stats.failed)).toEqual([0, 0]);
    // Nothing went out to any worker for the back-off (counted on the server's clock, from the throw's hand-out on).
    // The client dates a lease from its answer (the server's now and leaseUntil, then its own clock): a few ms of play.
    const CLOCK_PLAY_MS = 25;
    expect(
      longestGap(
        seen.map((m) => m.at),
        limitedAt!,
      ),
    ).toBeGreaterThanOrEqual(delayMs - CLOCK_PLAY_MS);
    const again = seen.filter((m) => m.data === "m5")[1]!;
    expect(again.at - limitedAt!).toBeGreaterThanOrEqual(delayMs - CLOCK_PLAY_MS);
    expect(again.deliveries).toBe(1);
  }, 90_000);

  it("worker(): ctx.rateLimit(ms) backs the consumer off and the message in hand is acked", async () => {
    const s = await startServer();
    const client = clientOf(s);
    await client.produce("q", ["a", "b", "c"]);
    const seen: Seen[] = [];
    const worker = client.worker(
      "q",
      "w",
      (m, ctx) => {
        seen.push(seenOf(m));
        if (m.data === "a") ctx.rateLimit(1500);
      },
      { concurrency: 1, batch: 1, leaseMs: LEASE_MS, ...quiet },
    );
    await until(() => seen.length === 3, 60_000);
    await worker.stop();
    expect(seen.map((m) => m.data)).toEqual(["a", "b", "c"]);
    expect(seen[2]!.at - seen[0]!.at).toBeGreaterThanOrEqual(1500);
    expect(worker.stats.processed).toBe(3);
    expect(() => worker.rateLimit(-1)).toThrow(/Invalid rateLimit delayMs -1/);
  }, 60_000);
});
