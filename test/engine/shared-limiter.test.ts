// A shared consumer's rate limit (`limiter: { max, durationMs }`) and back-off (`backOff(ms)`).
import { afterEach, describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { SharedConsumer, type LeasedMessage } from "../../src/consumers/shared/consumer";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { RateLimiter } from "../../src/consumers/shared/limiter";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { QueueWriter } from "../../src/writer/writer";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { handedOutAt, mostInAnyWindow } from "../helpers/rate";

const LEASE_MS = 600_000;
const quiet = { durability: "none", syncCommits: false, onProblem: () => {} } as const;
let n = 0;
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

async function setup(count: number) {
  const driver = memoryDriver({ name: `limiter-${++n}` });
  const writer = await QueueWriter.open("q", { driver, ...quiet });
  await writer.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
  await writer.close();
  return driver;
}

describe("a shared consumer's rate limit", () => {
  it("max 20 per 500 ms: over 3 s of hungry pollers never more than 20 in any 500 ms, and the waiting polls wake as it refills", async () => {
    const driver = await setup(1000);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS, limiter: { max: 20, durationMs: 500 } });
    opened.push(c);
    const got: LeasedMessage[] = [];
    const end = Date.now() + 3000;
    const poller = async () => {
      while (Date.now() < end) {
        const batch = await c.poll({ max: 7, timeoutMs: Math.max(0, end - Date.now()) });
        got.push(...batch);
        for (const m of batch) await c.ack(m);
      }
    };
    await Promise.all([poller(), poller(), poller(), poller()]);
    const times = got.map((m) => handedOutAt(m, LEASE_MS));
    expect(mostInAnyWindow(times, 500)).toBe(20);
    // The budget came back and went out again, window after window (not once, then stuck).
    expect(got.length).toBeGreaterThanOrEqual(60);
    expect(new Set(got.map((m) => m.data)).size).toBe(got.length);
  }, 60_000);

  it("a poll waiting for the budget wakes when it refills (not at its timeout), never before; stats say until when", async () => {
    const driver = await setup(50);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS, limiter: { max: 5, durationMs: 300 } });
    opened.push(c);
    const first = await c.poll({ max: 10 });
    expect(first).toHaveLength(5);
    expect(c.stats.limitedUntil).toBeGreaterThanOrEqual(handedOutAt(first[0]!, LEASE_MS) + 300);
    expect(await c.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    const started = performance.now();
    const next = await c.poll({ max: 10, timeoutMs: WAKE_TIMEOUT_MS });
    expectEndedEarly(started);
    expect(next).toHaveLength(5);
    expect(handedOutAt(next[0]!, LEASE_MS) - handedOutAt(first[0]!, LEASE_MS)).toBeGreaterThanOrEqual(300);
  }, 60_000);

  it("redeliveries count: a nacked message waits for the budget like a new one", async () => {
    const driver = await setup(10);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS, limiter: { max: 2, durationMs: 60_000 } });
    opened.push(c);
    const two = await c.poll({ max: 5 });
    expect(two).toHaveLength(2);
    await c.nack(two[0]!);
    expect(await c.poll({ max: 5, timeoutMs: 0 })).toEqual([]);
  });

  it("a restart (a hand-over) keeps the window: the next holder does not grant a fresh budget", async () => {
    const driver = await setup(50);
    const options = { driver, ...quiet, leaseMs: LEASE_MS, limiter: { max: 5, durationMs: 60_000 } };
    const a = await SharedConsumer.open("q", "s", options);
    expect(await a.poll({ max: 10 })).toHaveLength(5);
    await a.close();
    const b = await SharedConsumer.open("q", "s", options);
    opened.push(b);
    expect(await b.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    expect(b.stats.limitedUntil).toBeGreaterThan(Date.now());
  });

  it("backOff(ms): no lease to anyone until then, a waiting poll then wakes; a restart keeps it; a later end is kept", async () => {
    const driver = await setup(50);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS });
    opened.push(c);
    const waiting = c.poll({ max: 1, timeoutMs: WAKE_TIMEOUT_MS });
    const [first] = await waiting;
    expect(first).toBeDefined();
    const until = await c.backOff(400);
    expect(c.stats.limitedUntil).toBe(until);
    // A shorter one does not cut it short.
    expect(await c.backOff(10)).toBe(until);
    expect(await c.poll({ max: 1, timeoutMs: 0 })).toEqual([]);
    const started = performance.now();
    const [next] = await c.poll({ max: 1, timeoutMs: WAKE_TIMEOUT_MS });
    expectEndedEarly(started);
    expect(handedOutAt(next!, LEASE_MS)).toBeGreaterThanOrEqual(until);
    expect(c.stats.limitedUntil).toBeUndefined();

    const long = await c.backOff(60_000);
    await c.close();
    opened.length = 0;
    const again = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS });
    opened.push(again);
    expect(await again.poll({ max: 1, timeoutMs: 0 })).toEqual([]);
    expect(again.stats.limitedUntil).toBe(long);
  }, 60_000);

  it("checks its options and backOff's ms: E_OPTION saying what is allowed", async () => {
    const driver = await setup(1);
    const open = (limiter: unknown) => SharedConsumer.open("q", "s", { driver, ...quiet, limiter: limiter as never });
    await expect(open({ max: 0, durationMs: 1000 })).rejects.toThrow(/limiter\.max 0: use an integer from 1 to 1000000/);
    await expect(open({ max: 10, durationMs: 1.5 })).rejects.toThrow(/limiter\.durationMs 1.5: use an integer from 1 to 2147483647/);
    await expect(open({ max: 10 })).rejects.toThrow(/limiter\.durationMs undefined/);
    await expect(open({ max: 10, durationMs: 100, per: 1 })).rejects.toThrow(/Unknown key "limiter.per": use max and durationMs/);
    await expect(open(100)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringMatching(/limiter 100: expected an object/) });
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet });
    opened.push(c);
    await expect(c.backOff(-1)).rejects.toMatchObject({ code: "E_OPTION" });
  });
});

describe("RateLimiter", () => {
  it("a long window keeps few entries (takes close together are one, dated by the latest), and never lets more out than max", () => {
    const limiter = new RateLimiter({ max: 10_000, durationMs: 24 * 3600_000 }, { taken: [], pausedUntil: 0 });
    const start = 1_700_000_000_000;
    for (let i = 0; i < 5000; i++) limiter.spend(start + i, 2);
    expect(limiter.budget(start + 5000)).toBe(0);
    expect(
      limiter
        .lines(start + 5000)
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(1);
    // Out of the window only once the latest of the merged takes is.
    expect(limiter.budget(start + 24 * 3600_000 + 4998)).toBe(0);
    expect(limiter.budget(start + 24 * 3600_000 + 4999)).toBe(10_000);
  });
});

describe("a partitioned shared consumer's rate limit", () => {
  it("splits max across the partitions (their shares add up to it); backOff stops every partition held; max below the partition count is refused", async () => {
    const driver = memoryDriver({ name: `limiter-${++n}` });
    const writer = await PartitionedWriter.open("p", { driver, partitions: 3, ...quiet });
    // Many keys: every partition gets messages, more than its share.
    for (let k = 0; k < 60; k++) await writer.produce([`m${k}`], { partitionKey: `key-${k}` });
    await writer.close();
    const c = await PartitionedSharedConsumer.open("p", "s", { driver, ...quiet, limiter: { max: 10, durationMs: 60_000 } });
    opened.push(c);
    const got: LeasedMessage[] = [];
    // Every partition held here: each gives its share (4, 3, 3), then nothing.
    for (let round = 0; round < 10; round++) got.push(...(await c.poll({ max: 100, timeoutMs: 50 })));
    expect(got).toHaveLength(10);
    expect(c.stats.limitedUntil).toBeGreaterThan(Date.now());

    const d = await PartitionedSharedConsumer.open("p", "t", { driver, ...quiet });
    opened.push(d);
    await d.backOff(60_000);
    expect(await d.poll({ max: 100, timeoutMs: 100 })).toEqual([]);
    expect(d.stats.limitedUntil).toBeGreaterThan(Date.now());

    await expect(PartitionedSharedConsumer.open("p", "u", { driver, ...quiet, limiter: { max: 2, durationMs: 1000 } })).rejects.toThrow(
      /limiter\.max 2: use at least 3, one per partition/,
    );
  });
});
