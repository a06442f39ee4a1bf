import { describe, expect, it } from "vitest";
import { faulty } from "../helpers/faulty-driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { SharedState, messageKey, startsBelow } from "../../src/consumers/state/shared-state";
import { QueueWriter } from "../../src/writer/writer";
import type { QueueDriver } from "../../src/core/driver";
import memoryDriver from "../../adapters/drivers/memory";
import { AttributeIndex } from "../../src/consumers/shared/attributes";
import { decodeAttributeFrame, encodeAttributeCut, encodeAttributeRun } from "../../src/format/attributes";
import { encodeFrames } from "../../src/storage/side-log";
import { attributesPath } from "../../src/storage/paths";
import type { Message } from "../../src/format/message";
import { queueHub } from "../../src/storage/hub";

let failing = false;
const driverFor = (name: string): QueueDriver =>
  faulty(`${name}-${Math.random()}`, (step, path) => failing && step === "append" && path.includes("_info_shlog_"), false, false);

/** What a restart (after a crash) would load: each message's count of deliveries. */
async function countsOnDisk(driver: QueueDriver, keys: { part: number; offset: number }[]): Promise<number[]> {
  const loaded = await new SharedState(driver, "q", "s", false).load(() => {});
  return keys.map(({ part, offset }) => loaded.deliveries.get(messageKey(part, offset)) ?? (startsBelow(part, offset, loaded.mark) ? 1 : 0));
}

async function produce(driver: QueueDriver, items: [string, string | undefined][]) {
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  for (const [body, group] of items) await q.produce([body], group === undefined ? {} : { group });
  await q.close();
}

/** A memory driver whose shared journal's appends wait for `control.gate`, then fail when `control.failIf` says so. */
function gatedJournal(name: string): { driver: QueueDriver; control: { gate?: Promise<void>; failIf?: (text: string) => boolean } } {
  const inner = memoryDriver({ name: `${name}-${Math.random()}` });
  const control: { gate?: Promise<void>; failIf?: (text: string) => boolean } = {};
  const driver: QueueDriver = {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      if (!log || !path.includes("_info_shlog_")) return log;
      return {
        ...log,
        size: () => log.size(),
        read: (at, length) => log.read(at, length),
        sync: () => log.sync(),
        close: () => log.close(),
        truncate: (length, fence) => log.truncate(length, fence),
        async append(at, data, fence) {
          if (control.gate) await control.gate;
          if (control.failIf?.(new TextDecoder().decode(data))) throw new Error("injected");
          return log.append(at, data, fence);
        },
      };
    },
  };
  return { driver, control };
}

describe("the mark passing waiting messages (D;...;0)", () => {
  it("a failed journal write of a take loses its zeros: a later mark must not count the passed message", async () => {
    failing = false;
    const driver = driverFor("mark-fail");
    await produce(driver, [
      ["a1", "a"],
      ["a2", "a"],
      ["b1", "b"],
      ["c1", undefined],
    ]);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, leaseMs: 60_000 });
    // a1 and b1 go out; a2 waits for a1: the mark passes it with a count of 0 — in a write that fails.
    failing = true;
    await expect(c.poll({ max: 2 })).rejects.toThrow();
    failing = false;
    // The next take hands out c1: its mark is above a2.
    const got = await c.poll({ max: 10, timeoutMs: 0 });
    expect(got.map((m) => m.data)).toEqual(["c1"]);
    // a2 was never handed out: what a crash now would load must say 0, not 1 (the mark after c1).
    const all = await SharedConsumer.open("q", "t", { driver, syncCommits: false, groupConcurrency: 10 });
    const a2 = (await all.poll({ max: 10 })).find((m) => m.data === "a2")!;
    await all.close();
    expect(await countsOnDisk(driver, [a2])).toEqual([0]);
    await c.close();
  });
});

describe("attribute runs read already", () => {
  it("a cut after the runs were read (a rolled-back batch) is looked at: records written again past it get their new runs", async () => {
    const driver = memoryDriver({ name: `attrs-${Math.random()}` });
    await (await QueueWriter.open("q", { driver, durability: "none" })).close();
    const log = (await driver.openLog(attributesPath("q", 0), { create: true }))!;
    let size = 0;
    const append = async (payloads: Uint8Array[]) => {
      const data = encodeFrames(payloads);
      await log.append(size, data);
      size += data.length;
    };
    const message = (seq: number, crc: number): Message => ({ part: 0, offset: seq * 100, seq, type: "string", data: "x", size: 1, crc }) as Message;
    // Records 1..2 in group "a"; the run of a batch 3..6 in group "old" is written before its records.
    await append([encodeAttributeRun({ offset: 100, seq: 1, count: 2, crc: 11, attributes: { group: "a" } })]);
    await append([encodeAttributeRun({ offset: 300, seq: 3, count: 4, crc: 33, attributes: { group: "old" } })]);
    const index = new AttributeIndex(driver, "q");
    // The reader reads record 2: its look at the file reads the run of 3..6 too.
    expect((await index.lookup([message(2, 22)]))?.[0]).toEqual({ group: "a" });
    // The batch's part append fails: rolled back, cut after record 2; the next batch is 3..6 in group "new".
    await append([encodeAttributeCut(2)]);
    await append([encodeAttributeRun({ offset: 300, seq: 3, count: 4, crc: 44, attributes: { group: "new" } })]);
    const got = await index.lookup([message(3, 44), message(4, 45)]);
    expect(got?.map((a) => a?.group)).toEqual(["new", "new"]);
    await index.close();
  });
});

describe("attribute runs read already, with the writer in this process", () => {
  it("runs read before a rollback are looked at again once the writer notes it (its stamp)", async () => {
    const driver = memoryDriver({ name: `attrs-hub-${Math.random()}` });
    await (await QueueWriter.open("q", { driver, durability: "none" })).close();
    const hub = queueHub(driver, "q");
    const unregister = hub.registerWriter();
    const log = (await driver.openLog(attributesPath("q", 0), { create: true }))!;
    let size = 0;
    const append = async (payloads: Uint8Array[]) => {
      const data = encodeFrames(payloads);
      await log.append(size, data);
      size += data.length;
      hub.noteAttributes();
    };
    const message = (seq: number, crc: number): Message => ({ part: 0, offset: seq * 100, seq, type: "string", data: "x", size: 1, crc }) as Message;
    await append([encodeAttributeRun({ offset: 100, seq: 1, count: 2, crc: 11, attributes: { group: "a" } })]);
    await append([encodeAttributeRun({ offset: 300, seq: 3, count: 4, crc: 33, attributes: { group: "old" } })]);
    const index = new AttributeIndex(driver, "q");
    expect((await index.lookup([message(2, 22)]))?.[0]).toEqual({ group: "a" });
    // Nothing written since: the runs read already serve (no look needed), and they are right.
    expect((await index.lookup([message(1, 11)]))?.[0]).toEqual({ group: "a" });
    // Rolled back: cut after record 2 (noted, as writer.ts does), and records 3.. written again without attributes.
    await append([encodeAttributeCut(2)]);
    expect(await index.lookup([message(3, 44), message(4, 45)])).toBeUndefined();
    unregister();
    await index.close();
  });
});

describe("a snapshot taken while acks wait for the next round", () => {
  it("keeps the counts of messages whose ack is not written yet (the round may fail, or the process die before it)", async () => {
    const { driver, control } = gatedJournal("snap");
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.pushBatch(Array.from({ length: 4001 }, (_, i) => `m${i}`));
    await q.close();
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxAckWindow: 5000, maxInFlight: 5000, leaseMs: 600_000 });
    const all = await c.poll({ max: 4001 });
    expect(all).toHaveLength(4001);
    const x = all.at(-1)!;
    await c.nack(x);
    const [again] = await c.poll({ max: 1 });
    expect([again!.data, again!.deliveries]).toEqual([x.data, 2]);
    // Acks above the floor: the journal grows past 64 KiB (no snapshot while the floor stays).
    for (let i = 3999; i >= 1; i--) await c.ack(all[i]!);
    // m0's ack moves the floor: a snapshot after its round. x's ack waits for the next round meanwhile.
    let open!: () => void;
    control.gate = new Promise<void>((resolve) => (open = resolve));
    const front = c.ack(all[0]!);
    await new Promise((resolve) => setTimeout(resolve, 10));
    const late = c.ack(again!);
    // The round of m0 is written; the next one (x's ack) fails.
    control.failIf = (text) => new RegExp(`^(A|R);0;${x.offset};`, "m").test(text);
    control.gate = undefined;
    open();
    await front;
    await expect(late).rejects.toThrow();
    // A crash now: what would a restart count for x? It went out twice.
    expect(await countsOnDisk(driver, [x])).toEqual([2]);
  });
});

describe("groups while an ack is being written", () => {
  it("groupConcurrency 1: an ack in flight holds its group's turn; if its write fails, the acked message comes again before the next of its group", async () => {
    const { driver, control } = gatedJournal("grp");
    const failAcks = (text: string) => /^(A|R);/m.test(text);
    await produce(driver, [
      ["a1", "a"],
      ["a2", "a"],
    ]);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, leaseMs: 600_000 });
    const [a1] = await c.poll({ max: 10 });
    expect(a1!.data).toBe("a1");
    let open!: () => void;
    control.gate = new Promise<void>((resolve) => (open = resolve));
    control.failIf = failAcks;
    const acking = c.ack(a1!);
    // While a1's ack is written, the group waits: a2 does not go out.
    const polled = c.poll({ max: 10, timeoutMs: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    open();
    await expect(acking).rejects.toThrow();
    control.gate = undefined;
    control.failIf = undefined;
    expect(await polled).toEqual([]);
    // Its ack was not written: a1 comes again, before a2.
    const again = await c.poll({ max: 10, timeoutMs: 0 });
    expect(again.map((m) => m.data)).toEqual(["a1"]);
    // Written this time: a poll parked meanwhile gets a2 once the ack is written, not at its timeout.
    control.gate = new Promise<void>((resolve) => (open = resolve));
    const acked = c.ack(again[0]!);
    const parked = c.poll({ max: 10, timeoutMs: 600_000 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    open();
    await acked;
    expect((await parked).map((m) => m.data)).toEqual(["a2"]);
    await c.close();
  });
});

describe("attribute runs encoded into one growing buffer, groups read in place", () => {
  it("round-trips every field, a group of 255 characters, and groups that differ in one byte", () => {
    const long = "g".repeat(254) + "!";
    for (const group of [long, "a", "b", "ab", "ba", "customer-42", "customer-43", long]) {
      const run = {
        offset: 2 ** 40 + 3,
        seq: 7,
        count: 9,
        crc: 0xfedcba98,
        attributes: { group, priority: 3, maxDeliveries: 70000, backoff: { type: "exponential" as const, delayMs: 1234 } },
      };
      const payload = encodeAttributeRun(run);
      // In the middle of a larger buffer, as the index reads it.
      const framed = new Uint8Array(payload.length + 10);
      framed.set(payload, 5);
      expect(decodeAttributeFrame(framed.subarray(5, 5 + payload.length))).toEqual({ run });
    }
    expect(decodeAttributeFrame(encodeAttributeCut(12345))).toEqual({ cut: 12345 });
  });
});
