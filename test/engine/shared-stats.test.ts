import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { redrive } from "../../src/consumers/shared/dead-letter";
import { inspectQueue } from "../../src/inspect/queues";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-shared-stats-");

async function filled(count: number) {
  const driver = fsDriver({ dir: await freshDir() });
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  await q.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
  await q.close();
  return driver;
}

describe("a shared consumer's stats", () => {
  it("live: in flight, ready, waiting, redelivered, dead-lettered (kept across a restart), the oldest unacknowledged and the floor", async () => {
    const driver = await filled(5);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2, onProblem: () => {} });
    expect(c.stats).toEqual({
      inFlight: 0,
      ready: 0,
      waiting: 0,
      window: 0,
      redelivered: 0,
      redeliveredPending: 0,
      deadLettered: 0,
      deadLetteredTotal: 0,
      oldestUnacked: null,
      ackFloor: { part: 0, position: 0, count: 0 },
    });
    const [m0, m1, m2] = await c.poll({ max: 3 });
    expect(c.stats).toMatchObject({ inFlight: 3, ready: 0, waiting: 0, window: 3 });
    await c.ack(m1!);
    await c.nack(m0!);
    await c.nack(m2!, { delayMs: 60_000 });
    const before = c.stats;
    expect(before).toMatchObject({ inFlight: 0, ready: 1, waiting: 1, window: 3, redelivered: 0, redeliveredPending: 0 });
    expect(before.oldestUnacked).toMatchObject({ part: 0, offset: m0!.offset, seq: m0!.seq, deliveries: 1 });
    expect(before.oldestUnacked!.waitedMs).toBeGreaterThanOrEqual(0);

    const [again] = await c.poll({ max: 1 });
    expect(again).toMatchObject({ offset: m0!.offset, deliveries: 2 });
    expect(c.stats).toMatchObject({ inFlight: 1, redelivered: 1, redeliveredPending: 1 });
    // Its last delivery: to the dead-letter queue; the floor passes it and the acked m1.
    await c.nack(again!, { error: "boom" });
    const after = c.stats;
    expect(after).toMatchObject({ inFlight: 0, ready: 0, waiting: 1, window: 1, redeliveredPending: 0, deadLettered: 1, deadLetteredTotal: 1 });
    expect(after.ackFloor.count).toBe(2);
    expect(after.oldestUnacked).toMatchObject({ offset: m2!.offset, seq: m2!.seq, deliveries: 1 });
    await c.close();

    const reopened = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2 });
    expect(reopened.stats).toMatchObject({ deadLettered: 0, deadLetteredTotal: 1, redelivered: 0, ackFloor: { count: 2 } });
    await reopened.close();
  });
});

describe("inspectQueue on shared consumers", () => {
  it("tells each consumer's kind and, for a shared one, what its files hold; its lag leaves out the acks above the floor", async () => {
    const driver = await filled(5);
    const ordered = await QueueConsumer.open("q", "o", { driver, create: true, syncCommits: false });
    await ordered.read({ max: 2 });
    await ordered.commit();
    await ordered.close();
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2, onProblem: () => {} });
    const [m0, , m2] = await c.poll({ max: 3 });
    await c.ack(m2!);
    await c.nack(m0!);
    await c.poll({ max: 1 }); // m0 again: 2 deliveries

    const open = (await inspectQueue(driver, "q"))!;
    expect(open.consumers.map((x) => [x.name, x.kind, x.lag])).toEqual([
      ["o", "ordered", 3],
      ["s", "shared", 4],
    ]);
    expect(open.consumers[0]!.shared).toBeUndefined();
    expect(open.consumers[1]!.shared).toEqual({
      ackedAboveFloor: 1,
      pending: 2,
      redelivered: 1,
      maxDeliveries: 2,
      deadLettered: 0,
      oldestUnacked: { part: 0, offset: 0, seq: 1, deliveries: 2 },
    });

    await c.close();
    const reopened = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2, onProblem: () => {} });
    const got = await reopened.poll({ max: 5, timeoutMs: 0 });
    // After a restart every unacknowledged message comes again: m0 is due its 3rd delivery, so it is dead-lettered.
    expect(got.map((m) => m.data)).toEqual(["m1", "m3", "m4"]);
    for (const m of got) await reopened.ack(m);
    await reopened.close();
    const done = (await inspectQueue(driver, "q"))!;
    expect(done.consumers[1]).toMatchObject({ kind: "shared", count: 5, lag: 0 });
    expect(done.consumers[1]!.shared).toEqual({ ackedAboveFloor: 0, pending: 0, redelivered: 0, maxDeliveries: 0, deadLettered: 1, oldestUnacked: null });
  });
});

describe("redrive without a target queue", () => {
  it("moves each dead letter back to its origin queue; a message that is no dead letter is refused before anything moves", async () => {
    const driver = await filled(2);
    const other = await QueueWriter.open("r", { driver, durability: "none" });
    await other.push("r0");
    await other.close();
    for (const queue of ["q", "r"]) {
      const c = await SharedConsumer.open(queue, "s", { driver, syncCommits: false, maxDeliveries: 1, deadLetterQueue: "all.dead" });
      const [m] = await c.poll({ max: 1 });
      await c.nack(m!, { error: "no" });
      await c.close();
    }
    expect(await redrive(driver, "all.dead", undefined)).toBe(2);
    const read = async (queue: string) => {
      const r = await QueueConsumer.open(queue, "check", { driver, create: true, syncCommits: false });
      const got = (await r.read({ max: 10 })).map((m) => m.data);
      await r.close();
      return got;
    };
    expect(await read("q")).toEqual(["m0", "m1", "m0"]);
    expect(await read("r")).toEqual(["r0", "r0"]);

    const dlq = await QueueWriter.open("all.dead", { driver, durability: "none" });
    await dlq.push("by hand");
    await dlq.close();
    await expect(redrive(driver, "all.dead", undefined)).rejects.toThrow(/is no dead letter, so it has no origin queue/);
    expect(await redrive(driver, "all.dead", "q")).toBe(1);
    expect(await read("q")).toEqual(["m0", "m1", "m0", "by hand"]);
  });
});
