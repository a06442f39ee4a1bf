// Message attributes (format/attributes.ts) on every driver: priorities, a message's own
// maxDeliveries and backoff, kept beside the records (the parts stay the crate's bytes), across
// restarts, with delayed produces, and cut with the records a crash cut off.
import { afterEach, describe, expect, it, vi } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import { QueueWriter } from "../../src/writer/writer";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { FAIR_EVERY } from "../../src/consumers/shared/priority";
import type { SharedConsumerOptions } from "../../src/options/shared";
import { attributesPath, partPath } from "../../src/storage/paths";
import type { EngineTestContext } from "./engine-suite";
import { SideLog } from "../../src/storage/side-log";
import { encodeAttributeRun } from "../../src/format/attributes";

const quiet = { durability: "none", onProblem: () => {} } as const;

export function attributeTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe("message attributes", () => {
    const opened: { close(): Promise<void>; closed: boolean }[] = [];
    afterEach(async () => {
      for (const x of opened.splice(0).reverse()) if (!x.closed) await x.close().catch(() => {});
    });
    const writer = async (driver: QueueDriver, queue = "q", rollOnOpen = true) => {
      const q = await QueueWriter.open(queue, { driver, ...quiet, maxPartBytes: 64 * 1024, rollOnOpen });
      opened.push(q);
      return q;
    };
    const shared = async (driver: QueueDriver, options: SharedConsumerOptions = {}, queue = "q") => {
      const c = await SharedConsumer.open(queue, "s", { driver, syncCommits: false, onProblem: () => {}, ...options });
      opened.push(c);
      return c;
    };
    const low = (n: number, from = 0) => Array.from({ length: n }, (_, i) => `low${from + i}`);

    it("a message of a higher priority is leased at the next poll, before a backlog far past the ack window", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await q.produce(low(3000)); // over several parts (64 KiB each)
      const c = await shared(driver, { maxAckWindow: 100, maxInFlight: 100 });
      const first = await c.poll({ max: 5, timeoutMs: 0 });
      expect(first.map((m) => m.data)).toEqual(low(5));
      await c.ackAll(first);
      await q.produce(["urgent"], { priority: 9 });
      await q.produce(["soon"], { priority: 3 });
      const next = await c.poll({ max: 2, timeoutMs: 0 });
      expect(next.map((m) => [m.data, m.priority])).toEqual([
        ["urgent", 9],
        ["soon", 3],
      ]);
      for (const m of next) await c.ack(m);
      // The head reaches them later: acknowledged already, they never come again.
      const seen: string[] = [];
      for (;;) {
        const batch = await c.poll({ max: 100, timeoutMs: 0 });
        if (batch.length === 0) break;
        seen.push(...batch.map((m) => m.data as string));
        await c.ackAll(batch);
      }
      expect(seen).toEqual(low(3000).slice(5));
    });

    it("a message of a priority acknowledged ahead of the head never comes again, after a restart of the consumer too", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await q.produce(low(50));
      await q.produce(["urgent"], { priority: 1 });
      const c = await shared(driver);
      const [urgent] = await c.poll({ max: 1, timeoutMs: 0 });
      expect(urgent?.data).toBe("urgent");
      await c.ack(urgent!);
      await c.ack(urgent!); // again: done already
      await c.close();
      const again = await shared(driver);
      const seen: string[] = [];
      for (;;) {
        const batch = await again.poll({ max: 20, timeoutMs: 0 });
        if (batch.length === 0) break;
        seen.push(...batch.map((m) => m.data as string));
        await again.ackAll(batch);
      }
      expect(seen).toEqual(low(50));
    });

    it("under a constant load of higher priorities, every tenth lease goes to the oldest message", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await q.produce(low(50));
      await q.produce(
        Array.from({ length: 200 }, (_, i) => `high${i}`),
        { priority: 5 },
      );
      const c = await shared(driver);
      const leased: string[] = [];
      for (let i = 0; i < 10; i++) {
        const batch = await c.poll({ max: FAIR_EVERY, timeoutMs: 0 });
        leased.push(...batch.map((m) => m.data as string));
        await c.ackAll(batch);
      }
      const lows = leased.filter((b) => b.startsWith("low"));
      expect(lows).toEqual(low(10)); // one in ten, oldest first
      expect(leased.filter((b) => b.startsWith("high")).slice(0, 5)).toEqual(["high0", "high1", "high2", "high3", "high4"]);
    });

    it("a message's own maxDeliveries and backoff win over the consumer's; the parts are the bytes a plain produce writes", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await q.produce(["fragile"], { maxDeliveries: 1 });
      await q.produce(["patient"], { backoff: { type: "fixed", delayMs: 400 } });
      await q.produce(["plain"]);
      const c = await shared(driver, { maxDeliveries: 5 });
      const batch = await c.poll({ max: 3, timeoutMs: 0 });
      expect(batch.map((m) => m.data)).toEqual(["fragile", "patient", "plain"]);
      const nackedAt = Date.now();
      for (const m of batch) await c.nack(m, { error: "boom" });
      // "fragile" went to the dead-letter queue at its first failure; "plain" comes at once; "patient" after 400 ms.
      expect((await c.poll({ max: 3, timeoutMs: 0 })).map((m) => m.data)).toEqual(["plain"]);
      const [patient] = await c.poll({ max: 3, timeoutMs: 10_000 });
      expect(patient).toMatchObject({ data: "patient", deliveries: 2 });
      expect(Date.now() - nackedAt).toBeGreaterThanOrEqual(390);
      const dead = await QueueConsumer.open("q.dead", "check", { driver, onProblem: () => {} });
      opened.push(dead);
      expect((await dead.read({ max: 10 })).length).toBe(1);
      await q.close();

      // Same bodies without attributes: the same part bytes (the attributes live beside them).
      const plain = await writer(driver, "p");
      for (const body of ["fragile", "patient", "plain"]) await plain.produce([body]);
      await plain.close();
      const bytes = async (queue: string) => {
        const log = (await driver.openLog(partPath(queue, 0), { create: false }))!;
        const data = await log.read(0, await log.size());
        await log.close();
        return data;
      };
      expect(await bytes("q")).toEqual(await bytes("p"));
      expect(await driver.openLog(attributesPath("p", 0), { create: false })).toBeUndefined();
    });

    it("attributes survive a restart, and a delayed produce keeps them", async () => {
      const { driver, reopen } = await setup();
      const q = await writer(driver);
      await q.produce(low(20));
      await q.produce(["later"], { priority: 7, delayMs: 300 });
      await q.produce(["now"], { priority: 2 });
      await q.close();
      const again = reopen();
      const c = await shared(again);
      expect((await c.poll({ max: 1, timeoutMs: 0 })).map((m) => m.data)).toEqual(["now"]);
      const q2 = await writer(again);
      await vi.waitFor(() => expect(q2.delayedPending).toBe(0), { timeout: 10_000 });
      const [later] = await c.poll({ max: 1, timeoutMs: 10_000 });
      expect(later).toMatchObject({ data: "later", priority: 7 });
      await q2.close();
    });

    it("runs a crash left for records never written name none of the records written there since", async () => {
      const { driver } = await setup();
      // Appending to the part it finds (rollOnOpen: false), as the crate's writer does.
      const q = await writer(driver, "q", false);
      await q.produce(["a", "b"]);
      const { offset } = await q.push("c"); // seq 3: where the crashed batch began
      await q.close();
      // A crash between a batch's runs and its records: runs for seq 3 and 4 of records that never came.
      const { log } = await SideLog.open(driver, attributesPath("q", 0), "q", () => {});
      await log.append([encodeAttributeRun({ offset, seq: 3, count: 3, crc: 0, attributes: { priority: 9 } })], false);
      await log.close();
      const again = await writer(driver, "q", false);
      await again.produce(["d", "e"]); // seq 4 and 5
      const c = await shared(driver);
      const leased = await c.poll({ max: 10, timeoutMs: 0 });
      expect(leased.map((m) => [m.data, m.priority])).toEqual([
        ["a", undefined],
        ["b", undefined],
        ["c", undefined],
        ["d", undefined],
        ["e", undefined],
      ]);
    });

    it("a group's messages go one at a time, in order, while other groups go on; a failing head is retried, then dead-lettered, and its group goes on", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      for (let i = 0; i < 3; i++) for (const g of ["a", "b", "c"]) await q.produce([`${g}${i}`], { group: g });
      await q.produce(["free"]);
      const c = await shared(driver, { maxDeliveries: 2 });
      // The head of each group, and the message without a group.
      const first = await c.poll({ max: 10, timeoutMs: 0 });
      expect(first.map((m) => [m.data, m.group])).toEqual([
        ["a0", "a"],
        ["b0", "b"],
        ["c0", "c"],
        ["free", undefined],
      ]);
      const [a0, b0, c0, free] = first;
      await c.ackAll([b0!, free!]);
      await c.nack(a0!, { error: "boom" }); // a waits for a0 again
      const second = await c.poll({ max: 10, timeoutMs: 0 });
      expect(second.map((m) => [m.data, m.deliveries])).toEqual([
        ["a0", 2],
        ["b1", 1],
      ]);
      expect(await c.poll({ max: 10, timeoutMs: 0 })).toEqual([]); // a0, b1 and c0 leased: nothing else may go
      await c.ack(c0!);
      expect((await c.poll({ max: 10, timeoutMs: 0 })).map((m) => m.data)).toEqual(["c1"]);
      // a0 fails its 2nd delivery of 2: dead-lettered, and its group goes on with a1.
      await c.nack(second[0]!, { error: "boom again" });
      expect((await c.poll({ max: 10, timeoutMs: 0 })).map((m) => m.data)).toEqual(["a1"]);
      expect(c.stats.deadLetteredTotal).toBe(1);
    });

    it("groupConcurrency 2: two of a group at a time, the oldest first", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await q.produce(["g0", "g1", "g2", "g3"], { group: "g" });
      const c = await shared(driver, { groupConcurrency: 2 });
      const first = await c.poll({ max: 10, timeoutMs: 0 });
      expect(first.map((m) => m.data)).toEqual(["g0", "g1"]);
      await c.ack(first[1]!);
      expect((await c.poll({ max: 10, timeoutMs: 0 })).map((m) => m.data)).toEqual(["g2"]);
    });

    it("many groups, concurrent workers, random failures: each group completes in produce order, every message done or dead", async () => {
      const { driver } = await setup();
      const GROUPS = 100;
      const PER = 8;
      // Each message in its group: one produce per group and index, interleaved.
      const grouped = await writer(driver, "g");
      for (let i = 0; i < PER; i++) for (let g = 0; g < GROUPS; g++) await grouped.produce([`${g}:${i}`], { group: `group-${g}` });
      const c = await shared(driver, { maxDeliveries: 3 }, "g");
      let seed = 42;
      const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
      const completed = new Map<number, number[]>();
      let dead = 0;
      const worker = async () => {
        for (let idle = 0; idle < 3;) {
          const batch = await c.poll({ max: 5, timeoutMs: 50 });
          if (batch.length === 0) {
            idle++;
            continue;
          }
          idle = 0;
          for (const m of batch) {
            const [g, i] = (m.data as string).split(":").map(Number) as [number, number];
            if (random() < 0.2) {
              if (m.deliveries >= 3) dead++;
              await c.nack(m, { error: "random failure" });
              continue;
            }
            completed.set(g, [...(completed.get(g) ?? []), i]);
            await c.ack(m);
          }
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      let done = 0;
      for (const [g, order] of completed) {
        expect(order, `group ${g}`).toEqual([...order].sort((a, b) => a - b));
        done += order.length;
      }
      expect(done + dead).toBe(GROUPS * PER);
      expect(c.stats.deadLetteredTotal).toBe(dead);
    });

    it("produce options are checked: each wrong one says what is allowed", async () => {
      const { driver } = await setup();
      const q = await writer(driver);
      await expect(q.produce(["x"], { priority: 256 })).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("0 (the default) to 255") });
      await expect(q.produce(["x"], { maxDeliveries: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(q.produce(["x"], { backoff: { type: "linear", delayMs: 5 } as never })).rejects.toMatchObject({
        code: "E_OPTION",
        message: expect.stringContaining('"fixed" or "exponential"'),
      });
      await expect(shared(driver, { backoff: { type: "fixed", delayMs: -1 } })).rejects.toMatchObject({ code: "E_OPTION" });
    });
  });
}
