// A shared consumer's per-group rate limit (`groupLimiter: { max, durationMs }`), on real files.
import { readFile } from "node:fs/promises";
import { join } from "pathe";
import { afterEach, describe, expect, it, vi } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { SharedConsumer, type LeasedMessage } from "../../src/consumers/shared/consumer";
import { HandOut } from "../../src/consumers/shared/hand-out";
import { GroupLimiter } from "../../src/consumers/shared/group-limiter";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { sharedStatePath } from "../../src/storage/paths";
import { QueueWriter } from "../../src/writer/writer";
import { handedOutAt, mostInAnyWindow } from "../helpers/rate";
import { sleep } from "../helpers/sleep";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { useTempDirs } from "../helpers/tmp";

const LEASE_MS = 600_000;
const LIMIT = { max: 5, durationMs: 1000 };
const quiet = { durability: "none", syncCommits: false, onProblem: () => {} } as const;
const freshDir = useTempDirs("vq-group-limiter-");
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of opened.splice(0)) await c.close().catch(() => {});
});

/** A queue on real files with `groups` produced in this order: [group, count] each. */
async function setup(groups: [string, number][]) {
  const dir = freshDir();
  const driver = fsDriver({ dir });
  const writer = await QueueWriter.open("q", { driver, ...quiet });
  for (const [group, count] of groups)
    await writer.produce(
      Array.from({ length: count }, (_, i) => `${group}:${i}`),
      { group },
    );
  await writer.close();
  return { dir, driver };
}

const groupOf = (m: LeasedMessage) => m.group!;
const indexOf = (m: LeasedMessage) => Number((m.data as string).split(":").at(-1));

describe("a shared consumer's per-group rate limit", () => {
  it("3 groups, one with a backlog of 50, max 5 per 1000 ms: at most 5 of a group in any 1000 ms, the others not held up, each group in order", async () => {
    const { driver } = await setup([
      ["big", 50],
      ["a", 5],
      ["b", 5],
    ]);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS, groupLimiter: LIMIT });
    opened.push(c);
    const got: LeasedMessage[] = [];
    let empty = 0;
    const done = new AbortController();
    const poller = async () => {
      while (!done.signal.aborted) {
        const batch = await c.poll({ max: 3, timeoutMs: 5000, signal: done.signal });
        if (batch.length === 0 && !done.signal.aborted) empty++;
        got.push(...batch);
        for (const m of batch) await c.ack(m);
        if (got.length === 60) done.abort();
      }
    };
    await Promise.all([poller(), poller(), poller(), poller()]);
    expect(got).toHaveLength(60);
    // Never more than 5 of a group in any 1000 ms, at the holder's clock (exact: no excess).
    for (const group of ["big", "a", "b"]) {
      const times = got.filter((m) => groupOf(m) === group).map((m) => handedOutAt(m, LEASE_MS));
      expect(mostInAnyWindow(times, 1000), group).toBeLessThanOrEqual(5);
    }
    const bigTimes = got.filter((m) => groupOf(m) === "big").map((m) => handedOutAt(m, LEASE_MS));
    expect(mostInAnyWindow(bigTimes, 1000)).toBe(5);
    // The others went out while the big one waited for its window: before its 6th hand-out.
    const sixth = [...bigTimes].sort((x, y) => x - y)[5]!;
    for (const m of got.filter((m) => groupOf(m) !== "big")) expect(handedOutAt(m, LEASE_MS)).toBeLessThan(sixth);
    // Each group in produce order, each message once.
    for (const group of ["big", "a", "b"]) {
      const order = got.filter((m) => groupOf(m) === group).map(indexOf);
      expect(order, group).toEqual(order.map((_, i) => i));
    }
    expect(got.every((m) => m.deliveries === 1)).toBe(true);
    // Long polls waited for the windows (no early empty answers).
    expect(empty).toBe(0);
  }, 60_000);

  it("a poll that finds only limited groups waits until the earliest one's window frees: woken then (not at its timeout), without spinning", async () => {
    const { driver } = await setup([
      ["x", 10],
      ["y", 10],
    ]);
    const c = await SharedConsumer.open("q", "s", { driver, ...quiet, leaseMs: LEASE_MS, groupLimiter: { max: 2, durationMs: 2000 } });
    opened.push(c);
    const first: LeasedMessage[] = [];
    for (let i = 0; i < 2; i++) {
      const batch = await c.poll({ max: 10, timeoutMs: 0 });
      first.push(...batch);
      for (const m of batch) await c.ack(m);
    }
    expect(first.map((m) => m.data).sort()).toEqual(["x:0", "x:1", "y:0", "y:1"]);
    expect(await c.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    // Nothing else to do meanwhile: limitedUntil is for a consumer-wide stop only.
    expect(c.stats.limitedUntil).toBeUndefined();
    const takes = vi.spyOn(HandOut.prototype, "take");
    const started = performance.now();
    const next = await c.poll({ max: 10, timeoutMs: WAKE_TIMEOUT_MS });
    expectEndedEarly(started);
    expect(next.length).toBeGreaterThan(0);
    const earliest = Math.min(...first.map((m) => handedOutAt(m, LEASE_MS)));
    for (const m of next) expect(handedOutAt(m, LEASE_MS)).toBeGreaterThanOrEqual(earliest + 2000);
    // One take before the wait, one (or a few, as the two groups' windows free) after: not a loop.
    expect(takes.mock.calls.length).toBeLessThanOrEqual(4);
  }, 60_000);

  it("the window survives close and reopen: right after 5 leases of a group, the reopened consumer hands out none of it until the window frees", async () => {
    const { dir, driver } = await setup([
      ["big", 20],
      ["a;b", 6],
    ]);
    // A window long enough that the reopen comes well within it at a load of 4.
    const options = { driver, ...quiet, leaseMs: LEASE_MS, groupLimiter: { max: 5, durationMs: 3000 } };
    const a = await SharedConsumer.open("q", "s", options);
    const first: LeasedMessage[] = [];
    const count = (group: string) => first.filter((m) => groupOf(m) === group).length;
    while (count("big") < 5 || count("a;b") < 5) {
      const batch = await a.poll({ max: 10, timeoutMs: 0 });
      expect(batch.length).toBeGreaterThan(0);
      first.push(...batch);
      for (const m of batch) await a.ack(m);
    }
    expect(first.filter((m) => groupOf(m) === "a;b").map((m) => m.data)).toEqual(["a;b:0", "a;b:1", "a;b:2", "a;b:3", "a;b:4"]);
    await a.close();
    // The snapshot keeps each group's hand-outs in the window (a group holding ";" too).
    const snapshot = await readFile(join(dir, sharedStatePath("q", "s")), "utf8");
    expect(snapshot).toMatch(/^G;\d+;\d+;big;\d+$/m);
    expect(snapshot).toMatch(/^G;\d+;\d+;a;b;\d+$/m);

    const b = await SharedConsumer.open("q", "s", options);
    opened.push(b);
    expect(await b.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    const next: LeasedMessage[] = [];
    while (next.length < 2) next.push(...(await b.poll({ max: 10, timeoutMs: WAKE_TIMEOUT_MS })));
    expect(next.map((m) => m.data).sort()).toEqual(["a;b:5", "big:5"]);
    for (const m of next) {
      const earliest = Math.min(...first.filter((f) => groupOf(f) === groupOf(m)).map((f) => handedOutAt(f, LEASE_MS)));
      expect(handedOutAt(m, LEASE_MS)).toBeGreaterThanOrEqual(earliest + 3000);
    }
    for (const m of next) await b.ack(m);
    await b.close();
    opened.length = 0;
    // Once the windows are over, a snapshot no longer keeps them.
    await sleep(3100);
    const c = await SharedConsumer.open("q", "s", options);
    await c.close();
    expect(await readFile(join(dir, sharedStatePath("q", "s")), "utf8")).not.toMatch(/^G;/m);
  }, 60_000);

  it("redeliveries count, and with groupConcurrency 3 a take leases at most max of a group (its oldest)", async () => {
    const { driver } = await setup([["g", 10]]);
    const c = await SharedConsumer.open("q", "s", {
      driver,
      ...quiet,
      leaseMs: LEASE_MS,
      groupConcurrency: 3,
      groupLimiter: { max: 2, durationMs: 60_000 },
    });
    opened.push(c);
    const two = await c.poll({ max: 10, timeoutMs: 0 });
    expect(two.map((m) => m.data)).toEqual(["g:0", "g:1"]);
    await c.nack(two[0]!);
    expect(await c.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
  });

  it("on a partitioned queue each group gets the whole limit (a group lives in one partition)", async () => {
    const driver = fsDriver({ dir: freshDir() });
    const writer = await PartitionedWriter.open("p", { driver, partitions: 3, ...quiet });
    for (let g = 0; g < 6; g++)
      await writer.produce(
        [0, 1, 2, 3].map((i) => `g${g}:${i}`),
        { group: `g${g}` },
      );
    await writer.close();
    const c = await PartitionedSharedConsumer.open("p", "s", { driver, ...quiet, leaseMs: LEASE_MS, groupLimiter: { max: 2, durationMs: 60_000 } });
    opened.push(c);
    const got: string[] = [];
    for (let round = 0; round < 8; round++) {
      const batch = await c.poll({ max: 100, timeoutMs: 50 });
      got.push(...batch.map((m) => m.data as string));
      for (const m of batch) await c.ack(m);
    }
    expect(got.sort()).toEqual(Array.from({ length: 6 }, (_, g) => [`g${g}:0`, `g${g}:1`]).flat());
  });

  it("checks its option as limiter's: E_OPTION saying what is allowed", async () => {
    const { driver } = await setup([["g", 1]]);
    const open = (groupLimiter: unknown) => SharedConsumer.open("q", "s", { driver, ...quiet, groupLimiter: groupLimiter as never });
    await expect(open({ max: 0, durationMs: 1000 })).rejects.toThrow(/groupLimiter\.max 0: use an integer from 1 to 1000000/);
    await expect(open({ max: 10, durationMs: 1.5 })).rejects.toThrow(/groupLimiter\.durationMs 1.5: use an integer from 1 to 2147483647/);
    await expect(open({ max: 10, durationMs: 100, per: 1 })).rejects.toThrow(/Unknown key "groupLimiter.per": use max and durationMs/);
    await expect(open(100)).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringMatching(/groupLimiter 100: expected an object/) });
  });
});

describe("GroupLimiter", () => {
  it("with 10,000 groups keeps a window only for those with hand-outs in the last durationMs", () => {
    const limiter = new GroupLimiter({ max: 1, durationMs: 1000 }, []);
    const start = 1_700_000_000_000;
    // 20 groups a ms, over 500 ms.
    for (let g = 0; g < 10_000; g++) limiter.spend(`g${g}`, start + Math.floor(g / 20));
    expect(limiter.budget("g0", start + 999)).toBe(0);
    expect(
      limiter
        .written(start + 500)
        .split("\n")
        .filter(Boolean),
    ).toHaveLength(10_000);
    // Past every window but the last group's: the others are dropped.
    limiter.spend("late", start + 1498);
    expect(limiter.size).toBe(21); // the 20 of the last ms (start + 499) and "late"
    limiter.spend("later", start + 2500);
    expect(limiter.size).toBe(1);
    expect(limiter.budget("g0", start + 2500)).toBe(1);
    expect(limiter.lines(start + 2500)).toMatch(/^G;\d+;1;later;\d+\n$/);
  });
});
