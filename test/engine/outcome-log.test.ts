// A shared consumer's outcomes: results, failures, dead letters and progress, followed and waited for.
import { afterEach, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { followOutcomes, outcomeCursorNow, waitForOutcome } from "../../src/consumers/shared/outcomes";
import type { OutcomeEvent } from "../../src/consumers/types";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { QueueWriter } from "../../src/writer/writer";
import { sharedOutcomesPath } from "../../src/storage/paths";
import { useTempDirs } from "../helpers/tmp";
import { deleteConsumer } from "../../src/admin/delete";
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "pathe";

const tempDir = useTempDirs("vq-outcomes-");
const quiet = { durability: "none", onProblem: () => {} } as const;
const opened: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of opened.splice(0).reverse()) await c.close().catch(() => {});
});

async function queueOf(driver: QueueDriver, count: number): Promise<void> {
  const writer = await QueueWriter.open("q", { driver, ...quiet });
  await writer.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
  await writer.close();
}

async function open(driver: QueueDriver, options: Parameters<typeof SharedConsumer.open>[2] = {}): Promise<SharedConsumer> {
  const consumer = await SharedConsumer.open("q", "work", { driver, onProblem: () => {}, ...options });
  opened.push(consumer);
  return consumer;
}

/** The first `count` events of a stream (it is stopped after them). */
async function take(stream: AsyncGenerator<OutcomeEvent>, count: number): Promise<OutcomeEvent[]> {
  const got: OutcomeEvent[] = [];
  if (count === 0) return got;
  for await (const event of stream) {
    got.push(event);
    if (got.length === count) break;
  }
  return got;
}

describe("outcomes of a shared consumer", () => {
  it("completed with its result, failed with its error and when it comes again, dead, progress: in order, each once, surviving a restart", async () => {
    const driver = fsDriver({ dir: tempDir() });
    await queueOf(driver, 3);
    const c = await open(driver, { maxDeliveries: 1 });
    const [a, b, d] = await c.poll({ max: 3 });
    await c.progress(a!, { done: 50 });
    await c.ack(a!, { result: { sum: 42 } });
    await c.nack(b!, { error: "boom", delayMs: 60_000, deadLetter: false, release: false });
    await c.nack(d!, { error: "fatal" });
    await c.close();
    opened.length = 0;

    const events = await take(followOutcomes("q", "work", { driver, from: "oldest" }), 4);
    expect(events.map((e) => [e.kind, e.offset, e.id])).toEqual([
      ["progress", a!.offset, 1],
      ["completed", a!.offset, 2],
      ["dead", b!.offset, 3],
      ["dead", d!.offset, 4],
    ]);
    expect(events[0]!.progress).toEqual({ done: 50 });
    expect(events[1]!.result).toEqual({ sum: 42 });
    expect(events[1]).toMatchObject({ part: a!.part, seq: a!.seq, deliveries: 1 });
    expect(events[2]!.error).toBe("boom");
    expect(events[3]!.error).toBe("fatal");

    // After a restart the ids go on from where they were.
    await queueOf(driver, 1);
    const again = await open(driver, { maxDeliveries: 3 });
    const follow = followOutcomes("q", "work", { driver, after: events.at(-1)!.cursor });
    const [m] = await again.poll({ max: 1 });
    await again.nack(m!, { error: "try later", delayMs: 50 });
    const [failed] = await take(follow, 1);
    expect(failed).toMatchObject({ kind: "failed", id: 5, error: "try later", offset: m!.offset });
    // Due 50 ms after the nack, which came just before the event.
    expect(failed!.retryAt).toBeGreaterThan(failed!.at);
    expect(failed!.retryAt).toBeLessThanOrEqual(failed!.at + 50);
  });

  it("waitForOutcome: an end before the call is found, one after it is waited for, none is undefined at the timeout", async () => {
    const driver = memoryDriver({ name: "outcomes-wait" });
    await queueOf(driver, 3);
    const c = await open(driver, { maxDeliveries: 1 });
    const [a, b, d] = await c.poll({ max: 3 });
    await c.ack(a!, { result: "first" });
    const before = await waitForOutcome("q", "work", a!, { driver, timeoutMs: 0 });
    expect(before).toMatchObject({ kind: "completed", result: "first", offset: a!.offset });

    const later = waitForOutcome("q", "work", b!, { driver, timeoutMs: 30_000 });
    await c.progress(b!, 10); // not an end: still waiting
    await c.nack(b!, { error: "no" });
    expect(await later).toMatchObject({ kind: "dead", error: "no", offset: b!.offset });

    expect(await waitForOutcome("q", "work", d!, { driver, timeoutMs: 100 })).toBeUndefined();
  });

  it("waitForOutcome with timeoutMs 0 on files: every kept event is read before it gives up (an end after other events too)", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir });
    await queueOf(driver, 1);
    const c = await open(driver);
    const [a] = await c.poll({ max: 1 });
    await c.progress(a!, 1);
    await c.progress(a!, 2);
    await c.ack(a!, { result: "done" });
    // Another process's view (as an HTTP instance's): nothing of the log read yet.
    const reader = fsDriver({ dir });
    expect(await waitForOutcome("q", "work", a!, { driver: reader, timeoutMs: 0 })).toMatchObject({ kind: "completed", result: "done", offset: a!.offset });
  });

  it("outcomeCursorNow: a stream after it gives what was written from the call on, even before the stream's first read", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir });
    await queueOf(driver, 3);
    const c = await open(driver);
    const [a, b, d] = await c.poll({ max: 3 });
    await c.ack(a!, { result: "before" });
    const now = await outcomeCursorNow("q", "work", { driver: fsDriver({ dir }) });
    expect(now).toBe("1");
    await c.ack(b!, { result: "after" });
    await c.ack(d!, { result: "later" });
    const got = await take(followOutcomes("q", "work", { driver: fsDriver({ dir }), after: now }), 2);
    expect(got.map((e) => e.result)).toEqual(["after", "later"]);
    // No log yet: every event is after it.
    expect(await outcomeCursorNow("q", "nobody", { driver })).toBe("0");
  });

  it("a stream from now gives only later events; resumed after a cursor, none twice and none missed", async () => {
    const driver = memoryDriver({ name: "outcomes-resume" });
    await queueOf(driver, 40);
    const c = await open(driver);
    const first = await c.poll({ max: 10 });
    for (const m of first) await c.ack(m);
    const stream = followOutcomes("q", "work", { driver });
    const rest = await c.poll({ max: 30 });
    const acking = (async () => {
      for (const m of rest) await c.ack(m, { result: m.offset });
    })();
    const seen = await take(stream, 10);
    expect(seen.map((e) => e.result)).toEqual(rest.slice(0, 10).map((m) => m.offset));
    await acking;
    const resumed = await take(followOutcomes("q", "work", { driver, after: seen.at(-1)!.cursor }), 20);
    expect(resumed.map((e) => e.result)).toEqual(rest.slice(10).map((m) => m.offset));
  });

  it("keeps only the newest events (keep), and a follower across the compaction misses none of those kept", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir });
    await queueOf(driver, 300);
    const c = await open(driver, { outcomes: { keep: 20 } });
    const stop = new AbortController();
    const seenIds: number[] = [];
    const reading = (async () => {
      for await (const event of followOutcomes("q", "work", { driver, from: "oldest", signal: stop.signal })) {
        seenIds.push(event.id);
        if (event.id === 300) break;
      }
      return [];
    })();
    for (let i = 0; i < 30; i++) {
      const batch = await c.poll({ max: 10 });
      await c.ackAll(batch, { results: batch.map((m) => m.offset) });
    }
    const kept: OutcomeEvent[] = [];
    for await (const event of followOutcomes("q", "work", { driver, from: "oldest" })) if (kept.push(event) && event.id === 300) break;
    // From keep to four times keep of the newest, in order.
    expect(kept.length).toBeGreaterThanOrEqual(20);
    expect(kept.length).toBeLessThanOrEqual(80);
    expect(kept.map((e) => e.id)).toEqual(Array.from({ length: kept.length }, (_, i) => 301 - kept.length + i));
    // Read while written and compacted: each once, in order, up to the last; those dropped before
    // the follower came to them are the only ones it may lack (a fast follower has all 300).
    await reading;
    stop.abort();
    expect(seenIds.at(-1)).toBe(300);
    expect(seenIds.every((id, i) => i === 0 || id > seenIds[i - 1]!)).toBe(true);
    for (const event of kept) expect(seenIds).toContain(event.id);
    const log = await driver.openLog(sharedOutcomesPath("q", "work"), { create: false });
    const size = await log!.size();
    await log!.close();
    // At most four times keep events of about 100 bytes each.
    expect(size).toBeLessThan(80 * 200);
  });

  it("checks results and progress: JSON only, within 64 KiB, progress only under a lease held", async () => {
    const driver = memoryDriver({ name: "outcomes-checks" });
    await queueOf(driver, 2);
    const c = await open(driver);
    const [a, b] = await c.poll({ max: 2 });
    await expect(c.ack(a!, { result: 10n })).rejects.toMatchObject({ code: "E_OPTION", message: /JSON/ });
    await expect(c.ack(a!, { result: "x".repeat(70_000) })).rejects.toMatchObject({ code: "E_OPTION", message: /65536/ });
    await expect(c.progress(a!, undefined)).rejects.toMatchObject({ code: "E_OPTION" });
    await c.ack(b!);
    await expect(c.progress(b!, 1)).rejects.toMatchObject({ code: "E_LEASE" });
    await expect(take(followOutcomes("q", "work", { driver, after: "x1" }), 1)).rejects.toMatchObject({ code: "E_OPTION", message: /cursor/ });
    // Nothing refused was acknowledged: the message is still leased, and acks now.
    await c.ack(a!, { result: null });
    expect(await waitForOutcome("q", "work", a!, { driver, timeoutMs: 0 })).toMatchObject({ kind: "completed", result: null });
  });

  it("a torn tail (a crash mid-append) is cut at the next open, said, and the ids go on; a follower meanwhile skips it", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir });
    await queueOf(driver, 3);
    const c = await open(driver);
    const [a] = await c.poll({ max: 1 });
    await c.ack(a!, { result: "a" });
    await c.close();
    opened.length = 0;
    const path = join(dir, sharedOutcomesPath("q", "work"));
    const whole = readFileSync(path);
    // Half of a frame like the one there, as a crash would leave it.
    appendFileSync(path, whole.subarray(0, Math.floor(whole.length / 2)));
    const stop = new AbortController();
    const seen: OutcomeEvent[] = [];
    const following = (async () => {
      for await (const event of followOutcomes("q", "work", { driver, from: "oldest", signal: stop.signal, pollIntervalMs: 10 })) seen.push(event);
    })();
    const problems: string[] = [];
    const again = await open(driver, { onProblem: (p) => problems.push(p.code) });
    expect(problems).toContain("TORN_TAIL");
    const [m] = await again.poll({ max: 1 });
    await again.ack(m!, { result: "after" });
    expect(await waitForOutcome("q", "work", m!, { driver, timeoutMs: 10_000 })).toMatchObject({ id: 2, result: "after" });
    const until = Date.now() + 10_000;
    while (seen.length < 2 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    await following;
    expect(seen.map((e) => [e.id, e.result])).toEqual([
      [1, "a"],
      [2, "after"],
    ]);
  });

  it("many producers wait at once: each gets its own message's end, before or after it came", async () => {
    const driver = fsDriver({ dir: tempDir() });
    await queueOf(driver, 200);
    const c = await open(driver);
    const leased = await c.poll({ max: 200 });
    const early = leased.slice(0, 100);
    await c.ackAll(early.slice(0, 50), { results: early.slice(0, 50).map((m) => m.data) });
    const waits = leased.map((m) => waitForOutcome("q", "work", m, { driver, timeoutMs: 30_000 }));
    await c.ackAll(leased.slice(50), { results: leased.slice(50).map((m) => m.data) });
    const ends = await Promise.all(waits);
    expect(ends.map((e) => e?.result)).toEqual(leased.map((m) => m.data));
  });

  it("a consumer deleted and made again: its new log's events are followed from the start, and an old end is not taken for a new one", async () => {
    const driver = fsDriver({ dir: tempDir() });
    await queueOf(driver, 5);
    const c = await open(driver);
    const first = await c.poll({ max: 5 });
    for (const m of first) await c.ack(m, { result: `old ${m.data}` });
    const stop = new AbortController();
    const seen: OutcomeEvent[] = [];
    const following = (async () => {
      for await (const event of followOutcomes("q", "work", { driver, from: "oldest", signal: stop.signal, pollIntervalMs: 10 })) seen.push(event);
    })();
    expect(await waitForOutcome("q", "work", first[0]!, { driver, timeoutMs: 10_000 })).toMatchObject({ result: "old m0" });
    await c.close();
    opened.length = 0;
    await deleteConsumer(driver, "q", "work");
    const again = await open(driver, { start: "earliest" });
    const [m] = await again.poll({ max: 1 });
    expect(m!.offset).toBe(first[0]!.offset);
    // Not ended yet in the new consumer: the old end is not its answer.
    expect(await waitForOutcome("q", "work", m!, { driver, timeoutMs: 0 })).toBeUndefined();
    await again.ack(m!, { result: "new m0" });
    expect(await waitForOutcome("q", "work", m!, { driver, timeoutMs: 10_000 })).toMatchObject({ id: 1, result: "new m0" });
    const until = Date.now() + 10_000;
    while (seen.at(-1)?.result !== "new m0" && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    stop.abort();
    await following;
    expect(seen.map((e) => e.result)).toEqual([...first.map((x) => `old ${x.data}`), "new m0"]);
  });

  it("outcomes: false keeps none", async () => {
    const driver = memoryDriver({ name: "outcomes-off" });
    await queueOf(driver, 1);
    const c = await open(driver, { outcomes: false });
    const [a] = await c.poll({ max: 1 });
    await c.progress(a!, 1);
    await c.ack(a!, { result: 1 });
    expect(await waitForOutcome("q", "work", a!, { driver, timeoutMs: 50 })).toBeUndefined();
    expect(await driver.openLog(sharedOutcomesPath("q", "work"), { create: false })).toBeUndefined();
  });

  it("a partitioned queue: every partition's events in one stream with one cursor, resumed; waitForOutcome names the partition", async () => {
    const driver = memoryDriver({ name: "outcomes-partitioned" });
    const writer = await PartitionedWriter.open("pq", { driver, partitions: 3, ...quiet });
    for (let i = 0; i < 30; i++) await writer.produce([`m${i}`], { partitionKey: `k${i}` });
    await writer.close();
    const c = await PartitionedSharedConsumer.open("pq", "work", { driver, onProblem: () => {} });
    opened.push(c);
    const leased = [];
    while (leased.length < 30) leased.push(...(await c.poll({ max: 30, timeoutMs: 1000 })));
    expect(new Set(leased.map((m) => m.partition)).size).toBe(3);
    for (const m of leased.slice(0, 15)) await c.ack(m, { result: m.data });
    const firstHalf = await take(followOutcomes("pq", "work", { driver, from: "oldest" }), 15);
    for (const m of leased.slice(15)) await c.ack(m, { result: m.data });
    const secondHalf = await take(followOutcomes("pq", "work", { driver, after: firstHalf.at(-1)!.cursor }), 15);
    const results = [...firstHalf, ...secondHalf].map((e) => e.result).sort();
    expect(results).toEqual(leased.map((m) => m.data).sort());
    expect(firstHalf.every((e) => e.partition !== undefined)).toBe(true);
    const m = leased[20]!;
    expect(await waitForOutcome("pq", "work", m, { driver, timeoutMs: 0 })).toMatchObject({ kind: "completed", partition: m.partition, result: m.data });
    await expect(waitForOutcome("pq", "work", { part: m.part, offset: m.offset }, { driver })).rejects.toMatchObject({
      code: "E_OPTION",
      message: /partition/,
    });
  });
});
