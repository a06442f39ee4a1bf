// Over 300 lines: one suite every driver file runs by one call.
// Shared consumers (src/consumers/shared/consumer.ts) on every driver: leases, acks, nacks, dead
// letters, restarts, kinds, bounds and the crate-format floor.
import { afterEach, describe, expect, it } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { inspectQueue, listConsumers } from "../../src/inspect/queues";
import { deleteConsumer, deleteQueue } from "../../src/admin/delete";
import { parseDeadLetter, redrive } from "../../src/consumers/shared/dead-letter";
import { SharedConsumer, type LeasedMessage } from "../../src/consumers/shared/consumer";
import type { SharedConsumerOptions } from "../../src/options/shared";
import { popInfoPath, sharedJournalPath, sharedStatePath } from "../../src/storage/paths";
import { seededRandom } from "../helpers/random";
import type { EngineTestContext } from "./engine-suite";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";
import { handedOutAt, mostInAnyWindow } from "../helpers/rate";

const quiet = { durability: "none", onProblem: () => {} } as const;
const text = new TextDecoder();

export function sharedTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe("shared consumers", () => {
    const opened: { close(): Promise<void>; closed: boolean }[] = [];
    afterEach(async () => {
      for (const x of opened.splice(0)) if (!x.closed) await x.close().catch(() => {});
    });
    const fill = async (driver: QueueDriver, count: number, queue = "q") => {
      const q = await QueueWriter.open(queue, { driver, ...quiet });
      if (count > 0) await q.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
      await q.close();
    };
    const shared = async (driver: QueueDriver, options: SharedConsumerOptions = {}, name = "s") => {
      const c = await SharedConsumer.open("q", name, { driver, syncCommits: false, onProblem: () => {}, ...options });
      opened.push(c);
      return c;
    };
    const bodies = (messages: LeasedMessage[]) => messages.map((m) => m.data as string);

    it("several workers with random failures: every message done, none lost; the floor reaches the end in crate format", async () => {
      const { driver } = await setup();
      await fill(driver, 60);
      const c = await shared(driver, { leaseMs: 5000, maxDeliveries: 1000 }); // never dead-lettered: every message must end done
      const random = seededRandom(7);
      const done = new Map<string, number>();
      const worker = async () => {
        for (;;) {
          const batch = await c.poll({ max: 3, timeoutMs: 30 });
          if (batch.length === 0) {
            if (done.size === 60) return;
            continue;
          }
          for (const m of batch) {
            if (random() < 0.3) await c.nack(m, { error: "flaky" });
            else {
              await c.ack(m);
              done.set(m.data as string, (done.get(m.data as string) ?? 0) + 1);
            }
          }
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      expect([...done.keys()].sort()).toEqual(Array.from({ length: 60 }, (_, i) => `m${i}`).sort());
      expect([...done.values()].every((n) => n === 1)).toBe(true);
      expect(c.stats).toMatchObject({ inFlight: 0, window: 0, deadLettered: 0, oldestUnacked: null });
      // The floor is saved after the last ack's answer (lazily): closed, the consumer has saved it.
      // Read before, a driver that rewrites a file in two steps (unstorage) can show it empty.
      await c.close();
      const line = text.decode(await driver.readRecord(popInfoPath("q", "s")));
      expect(line).toMatch(/^q;s;\d+;60;0\n/);
      expect((await listConsumers(driver, "q")).map((x) => [x.name, x.lag])).toEqual([["s", 0]]);
      expect((await inspectQueue(driver, "q"))?.consumers.map((x) => x.name)).toEqual(["s"]);
    });

    it("workers that nack, abandon (the lease runs out) and ack at random: one holder at a time, every message done", async () => {
      const { driver } = await setup();
      await fill(driver, 40);
      const c = await shared(driver, { leaseMs: 200, maxDeliveries: 1000 });
      const random = seededRandom(11);
      const holder = new Map<string, number>(); // body -> held until (ms)
      const done = new Set<string>();
      const worker = async (id: number) => {
        while (done.size < 40) {
          for (const m of await c.poll({ max: 2, timeoutMs: 50 })) {
            const body = m.data as string;
            // Held until acked or nacked, or else until its lease ends.
            const heldUntil = holder.get(body);
            expect(heldUntil === undefined || Date.now() >= heldUntil, `${body} given to ${id} while with another`).toBe(true);
            expect(done.has(body), `${body} acknowledged already`).toBe(false);
            holder.set(body, m.leaseUntil);
            await sleep(random() * 5);
            const roll = random();
            holder.delete(body);
            if (roll < 0.2) await c.nack(m, { delayMs: 5 });
            else if (roll < 0.3)
              holder.set(body, m.leaseUntil); // abandoned: its lease runs out
            else {
              await c.ack(m);
              done.add(body);
            }
          }
        }
      };
      await Promise.all([1, 2, 3].map(worker));
      expect(done.size).toBe(40);
      expect(c.floor.count).toBe(40);
    });

    it("a message is with one worker at a time; a lease that runs out hands it to another; extend keeps it", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const c = await shared(driver);
      // 1 s leases: the look and the extend below come well within them at a load of 4.
      const [a] = await c.poll({ max: 1, leaseMs: 1000 });
      const [b] = await c.poll({ max: 1, leaseMs: 1000 });
      expect([a!.data, b!.data]).toEqual(["m0", "m1"]);
      expect(await c.poll({ timeoutMs: 0 })).toEqual([]);
      await c.extend(b!, { leaseMs: 10_000 });
      const again = await c.poll({ max: 5, timeoutMs: 5000 });
      expect(bodies(again)).toEqual(["m0"]); // a's lease ran out, b's was extended
      expect(again[0]!.deliveries).toBe(2);
      // The first worker lost its lease to another: its nack, extend and ack are refused.
      await expect(c.nack(a!)).rejects.toMatchObject({ code: "E_LEASE" });
      await expect(c.extend(a!)).rejects.toMatchObject({ code: "E_LEASE" });
      await expect(c.ack(a!)).rejects.toMatchObject({ code: "E_LEASE" });
      await c.ack(again[0]!);
      await c.ack(again[0]!); // acked already: a no-op
      await c.ack(b!);
      expect(c.floor.count).toBe(2);
    });

    it("nack with a delay is not handed out again early", async () => {
      const { driver } = await setup();
      await fill(driver, 1);
      const c = await shared(driver);
      const [m] = await c.poll();
      const at = Date.now();
      // 1 s: the look before it is due comes well within it at a load of 4.
      await c.nack(m!, { delayMs: 1000 });
      expect(await c.poll({ timeoutMs: 50 })).toEqual([]);
      const [again] = await c.poll({ timeoutMs: 10_000 });
      expect(Date.now() - at).toBeGreaterThanOrEqual(995);
      expect(again!.data).toBe("m0");
      expect(again!.deliveries).toBe(2);
    });

    it("after maxDeliveries a message goes to the dead-letter queue with origin, deliveries and error; redrive brings it back", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const c = await shared(driver, { maxDeliveries: 2 });
      for (let i = 0; i < 2; i++) {
        const [m] = await c.poll({ max: 1 });
        expect(m!.data).toBe("m0");
        await c.nack(m!, { error: `boom ${i}` });
      }
      const [next] = await c.poll({ max: 1 });
      expect(next!.data).toBe("m1");
      await c.ack(next!);
      expect(c.floor.count).toBe(2); // the dead letter is acknowledged here
      const dlq = await QueueConsumer.open("q.dead", "look", { driver, syncCommits: false });
      const [dead] = await dlq.read();
      await dlq.close();
      const letter = parseDeadLetter(dead!)!;
      expect(letter).toMatchObject({
        origin: { queue: "q", consumer: "s", part: 0, offset: 0, seq: 1 },
        deliveries: 2,
        error: "boom 1",
        type: "string",
        data: "m0",
      });
      await c.close();
      expect(await redrive(driver, "q.dead", "q")).toBe(1);
      expect(await redrive(driver, "q.dead", "q")).toBe(0);
      const c2 = await shared(driver);
      const [back] = await c2.poll();
      expect(back).toMatchObject({ data: "m0", deliveries: 1, seq: 1, part: 1 });
    });

    it("nack with deadLetter sends it to the dead-letter queue at once; stats count it and redeliveries; redrive with no queue sends it to its origin", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const c = await shared(driver, { maxDeliveries: 5 });
      const [first] = await c.poll({ max: 1 });
      await c.nack(first!);
      const [again] = await c.poll({ max: 1 });
      expect(again).toMatchObject({ data: "m0", deliveries: 2 });
      expect(c.stats).toMatchObject({ inFlight: 1, redelivered: 1, deadLettered: 0, oldestUnacked: { part: 0, offset: 0, seq: 1 } });
      await c.nack(again!, { error: "bad input", deadLetter: true });
      expect(c.stats).toMatchObject({ inFlight: 0, deadLettered: 1 });
      const [next] = await c.poll({ max: 1 });
      expect(next!.data).toBe("m1");
      await c.ack(next!);
      await c.close();
      const dlq = await QueueConsumer.open("q.dead", "look", { driver, syncCommits: false });
      const [dead] = await dlq.read();
      await dlq.close();
      expect(parseDeadLetter(dead!)).toMatchObject({ origin: { queue: "q", seq: 1 }, deliveries: 2, error: "bad input", data: "m0" });
      expect(await redrive(driver, "q.dead", undefined)).toBe(1);
      const c2 = await shared(driver);
      const [back] = await c2.poll();
      expect(back).toMatchObject({ data: "m0", deliveries: 1 });
    });

    it("ackAll acks a batch in one write: each ref's outcome, E_LEASE for one never handed out, a repeat is fine", async () => {
      const { driver } = await setup();
      await fill(driver, 3);
      const c = await shared(driver);
      const got = await c.poll({ max: 3 });
      const outcomes = await c.ackAll([got[0]!, got[2]!, got[0]!, { part: 0, offset: 999_999, lease: 1 }]);
      expect(outcomes.map((e) => (e ? (e as { code?: string }).code : "ok"))).toEqual(["ok", "ok", "ok", "E_LEASE"]);
      expect(await c.ackAll([got[0]!])).toEqual([undefined]);
      await c.ack(got[1]!);
      expect(c.floor.count).toBe(3);
      await c.close();
      const again = await shared(driver);
      expect(await again.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    });

    it("a lease that runs out on the last delivery dead-letters the message, and the same poll goes on with the next", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const c = await shared(driver, { maxDeliveries: 2 });
      expect((await c.poll({ max: 1, leaseMs: 20 }))[0]!.data).toBe("m0");
      await sleep(30);
      expect((await c.poll({ max: 1, leaseMs: 20 }))[0]).toMatchObject({ data: "m0", deliveries: 2 });
      const [m1] = await c.poll({ max: 1 });
      await c.nack(m1!); // ready again, behind m0 in the window
      await sleep(40); // m0's second lease runs out
      const started = performance.now();
      const [next] = await c.poll({ max: 1, timeoutMs: WAKE_TIMEOUT_MS });
      expect(next).toMatchObject({ data: "m1", deliveries: 2 });
      expectEndedEarly(started);
      const dlq = await QueueConsumer.open("q.dead", "look", { driver, syncCommits: false });
      expect((await dlq.read()).map((m) => [parseDeadLetter(m)?.data, parseDeadLetter(m)?.error])).toEqual([["m0", "its lease ran out (delivery 2)"]]);
      await dlq.close();
    });

    it("a dead-letter queue that cannot be written keeps the message here, not handed out, and tries again", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const held = await QueueWriter.open("q.dead", { driver, ...quiet });
      const problems: string[] = [];
      const c = await shared(driver, { maxDeliveries: 1, onProblem: (p) => problems.push(p.code) });
      const [m0] = await c.poll({ max: 1 });
      await expect(c.nack(m0!, { error: "bad" })).rejects.toMatchObject({ code: "E_LOCKED" });
      expect(bodies(await c.poll({ max: 5 }))).toEqual(["m1"]);
      expect(problems).toEqual(["DEAD_LETTER_FAILED"]);
      await held.close();
      expect(await c.poll({ max: 5, timeoutMs: 0 })).toEqual([]);
      expect(c.floor.count).toBe(1); // m0 moved and is acknowledged; m1 is leased
      expect(c.stats).toMatchObject({ inFlight: 1, window: 1 });
      const dlq = await QueueConsumer.open("q.dead", "look", { driver, syncCommits: false });
      expect((await dlq.read()).map((m) => parseDeadLetter(m)?.error)).toEqual(["bad"]);
      await dlq.close();
    });

    it("bytes survive the dead-letter queue and redrive", async () => {
      const { driver } = await setup();
      const q = await QueueWriter.open("q", { driver, ...quiet });
      await q.push(new Uint8Array([0, 255, 7]));
      await q.close();
      const c = await shared(driver, { maxDeliveries: 1 });
      const [m] = await c.poll();
      await c.nack(m!, { error: "no" });
      await c.close();
      expect(await redrive(driver, "q.dead", "q")).toBe(1);
      const c2 = await shared(driver);
      const [back] = await c2.poll();
      expect(back!.type).toBe("object");
      expect([...(back!.data as Uint8Array)]).toEqual([0, 255, 7]);
    });

    it("restart: every unacknowledged message comes again, with its count; no acknowledged one does", async () => {
      const ctx = await setup();
      await fill(ctx.driver, 6);
      const c = await shared(ctx.driver, { syncCommits: true });
      const got = await c.poll({ max: 6 });
      await c.ack(got[1]!);
      await c.ack(got[3]!);
      await c.ack(got[4]!);
      await c.nack(got[2]!);
      await c.close();
      expect(text.decode(await ctx.driver.readRecord(popInfoPath("q", "s")))).toMatch(/^q;s;0;0;0\n/);
      const c2 = await shared(ctx.reopen());
      const again = await c2.poll({ max: 10 });
      expect(bodies(again)).toEqual(["m0", "m2", "m5"]);
      expect(again.map((m) => m.deliveries)).toEqual([2, 2, 2]);
      for (const m of again) await c2.ack(m);
      expect(c2.floor.count).toBe(6);
      expect(await c2.poll({ timeoutMs: 0 })).toEqual([]);
    });

    it("an ack is refused (E_LEASE) from a lease whose message is with another worker now, or with a lease never given; a late one is taken while nobody holds it", async () => {
      const { driver } = await setup();
      await fill(driver, 3);
      const c = await shared(driver);
      const [a] = await c.poll({ max: 1, leaseMs: 30 });
      await sleep(60);
      const [b] = await c.poll({ max: 1, leaseMs: 10_000 }); // another worker has it now
      expect(b!.offset).toBe(a!.offset);
      await expect(c.ack(a!)).rejects.toMatchObject({ code: "E_LEASE" });
      expect((await c.ackAll([a!]))[0]).toMatchObject({ code: "E_LEASE" });
      const [first, second] = await c.poll({ max: 2, leaseMs: 30 });
      await expect(c.ack({ ...second!, lease: second!.lease + 1000 })).rejects.toMatchObject({ code: "E_LEASE" }); // never given
      await sleep(60);
      await c.ack(second!); // ran out, nobody took it since: the work is done
      await c.ack(b!);
      // Only the one whose lease ran out unacknowledged comes again.
      expect((await c.poll({ max: 10, timeoutMs: 0 })).map((m) => m.offset)).toEqual([first!.offset]);
      await c.close();
    });

    it("nack with release gives a message back uncounted: never dead-lettered by hand-outs nobody worked on", async () => {
      const { driver } = await setup();
      await fill(driver, 1);
      const c = await shared(driver, { maxDeliveries: 1 });
      for (let i = 0; i < 3; i++) {
        const [m] = await c.poll({ max: 1 });
        expect(m!.deliveries).toBe(1);
        await c.nack(m!, { release: true });
      }
      await expect(c.nack((await c.poll({ max: 1 }))[0]!, { release: true, deadLetter: true })).rejects.toMatchObject({ code: "E_OPTION" });
      await c.close();
    });

    it("a message whose last delivery ended with a restart is dead-lettered saying so", async () => {
      const ctx = await setup();
      await fill(ctx.driver, 1);
      let driver = ctx.driver;
      for (let run = 0; run < 2; run++) {
        const c = await shared(driver, { syncCommits: true, maxDeliveries: 2 });
        expect(await c.poll({ max: 1 })).toHaveLength(1);
        await c.close(); // neither acked nor nacked: its lease ends with the process
        driver = ctx.reopen();
      }
      const c = await shared(driver, { maxDeliveries: 2 });
      expect(await c.poll({ timeoutMs: 0 })).toEqual([]);
      await c.close();
      const dlq = await QueueConsumer.open("q.dead", "look", { driver, syncCommits: false });
      const [dead] = await dlq.read();
      await dlq.close();
      expect(parseDeadLetter(dead!)).toMatchObject({ deliveries: 2, error: expect.stringMatching(/delivery 2 ended with a restart/) });
    });

    it("a name keeps its kind: E_KIND both ways; delete removes a shared consumer's state", async () => {
      const { driver } = await setup();
      await fill(driver, 1);
      await (await QueueConsumer.open("q", "ordered", { driver, syncCommits: false })).close();
      await expect(SharedConsumer.open("q", "ordered", { driver })).rejects.toMatchObject({ code: "E_KIND" });
      const c = await shared(driver, {}, "sh");
      await expect(QueueConsumer.open("q", "sh", { driver })).rejects.toMatchObject({ code: "E_LOCKED" });
      await c.close();
      await expect(QueueConsumer.open("q", "sh", { driver })).rejects.toMatchObject({ code: "E_KIND" });
      await deleteConsumer(driver, "q", "sh");
      expect(await driver.readRecord(sharedStatePath("q", "sh"))).toBeUndefined();
      await (await QueueConsumer.open("q", "sh", { driver, syncCommits: false })).close();
    });

    it("deleteQueue removes a shared consumer's state with the queue", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      const c = await shared(driver);
      await c.ack((await c.poll({ max: 2 }))[1]!);
      await c.close();
      expect(await driver.readRecord(sharedStatePath("q", "s"))).toBeDefined();
      expect((await deleteQueue(driver, "q")).consumers).toEqual(["s"]);
      expect(await driver.readRecord(sharedStatePath("q", "s"))).toBeUndefined();
      expect(await driver.list("")).not.toContain(sharedJournalPath("q", "s"));
    });

    it("a late ack, nack or extend of a consumer deleted since (with its queue, or alone) never touches its namesake's new message at that position", async () => {
      const { driver } = await setup();
      await fill(driver, 2);
      let c = await shared(driver);
      const old = await c.poll({ max: 2, leaseMs: 10_000 });
      await c.close();
      await deleteQueue(driver, "q");
      await fill(driver, 2);
      c = await shared(driver);
      const [fresh] = await c.poll({ max: 1, leaseMs: 20 });
      expect([fresh!.part, fresh!.offset]).toEqual([old[0]!.part, old[0]!.offset]);
      await sleep(40); // its lease ran out: a late ack of the new lease would be taken now
      await expect(c.ack(old[0]!)).rejects.toMatchObject({ code: "E_LEASE", message: expect.stringContaining("earlier consumer") });
      expect((await c.ackAll([old[0]!]))[0]).toMatchObject({ code: "E_LEASE" });
      await expect(c.nack(old[0]!)).rejects.toMatchObject({ code: "E_LEASE" });
      await expect(c.extend(old[0]!)).rejects.toMatchObject({ code: "E_LEASE" });
      // Across a restart of the new consumer too (its message handed out, not in a window yet).
      await c.close();
      c = await shared(driver);
      await expect(c.ack(old[0]!)).rejects.toMatchObject({ code: "E_LEASE" });
      await expect(c.ack(old[1]!)).rejects.toMatchObject({ code: "E_LEASE" });
      const again = await c.poll({ max: 2, timeoutMs: 0 });
      expect(bodies(again)).toEqual(["m0", "m1"]);
      await c.ackAll(again);
      await c.close();
      // A consumer deleted alone: the same.
      c = await shared(driver);
      await c.close();
      await fill(driver, 1);
      c = await shared(driver);
      const [third] = await c.poll({ max: 1, leaseMs: 20 });
      await c.close();
      await deleteConsumer(driver, "q", "s");
      c = await shared(driver);
      const [reborn] = await c.poll({ max: 1, leaseMs: 20 });
      expect(reborn!.offset).toBe(old[0]!.offset); // a new consumer starts at the queue's start
      await sleep(40);
      await expect(c.ack(third!)).rejects.toMatchObject({ code: "E_LEASE" });
      await c.ack(reborn!);
      await c.close();
    });

    it("a delete cut short after the position went (the state left): the name starts afresh, no old ack or lease counts", async () => {
      const { driver } = await setup();
      await fill(driver, 3);
      let c = await shared(driver);
      const old = await c.poll({ max: 3, leaseMs: 10_000 });
      await c.ack(old[1]!); // acked above the floor: a line in the state
      await c.close();
      await driver.remove(popInfoPath("q", "s"));
      c = await shared(driver);
      // All three come: m1's old ack is no ack of the new consumer's.
      const again = await c.poll({ max: 3, leaseMs: 20 });
      expect(bodies(again)).toEqual(["m0", "m1", "m2"]);
      await sleep(40);
      await expect(c.ack(old[0]!)).rejects.toMatchObject({ code: "E_LEASE" });
      await c.ackAll(again);
      await c.close();
    });

    it("one object per name in a process; another opener elsewhere gets E_LOCKED", async () => {
      const ctx = await setup();
      await fill(ctx.driver, 1);
      const a = await shared(ctx.driver);
      const b = await shared(ctx.driver);
      expect(b).toBe(a);
      await b.close();
      expect(a.closed).toBe(false);
      if (ctx.reopen().storageKey !== ctx.driver.storageKey)
        await expect(SharedConsumer.open("q", "s", { driver: ctx.reopen() })).rejects.toMatchObject({ code: "E_LOCKED" });
    });

    it("bounded: at most maxInFlight leased, and no further than maxAckWindow past a stuck message", async () => {
      const { driver } = await setup();
      await fill(driver, 30);
      const c = await shared(driver, { maxInFlight: 4, maxAckWindow: 10 });
      const first = await c.poll({ max: 10 });
      expect(first).toHaveLength(4);
      expect(await c.poll({ timeoutMs: 20 })).toEqual([]);
      for (const m of first.slice(1)) await c.ack(m); // m0 stays leased: the floor is stuck
      const seen = first.slice(1).map((m) => m.data);
      for (;;) {
        const batch = await c.poll({ max: 10, timeoutMs: 20 });
        if (batch.length === 0) break;
        expect(c.stats.inFlight).toBeLessThanOrEqual(4);
        for (const m of batch) await c.ack(m);
        seen.push(...bodies(batch));
      }
      expect(seen).toHaveLength(9); // m1..m9: the window ends 10 messages past the floor
      expect(c.stats.window).toBe(10);
      await c.ack(first[0]!);
      expect(c.floor.count).toBe(10);
      expect(bodies(await c.poll({ max: 4 }))).toEqual(["m10", "m11", "m12", "m13"]);
    });

    it("the iterator acks what the loop finishes and nacks the message in hand when it throws", async () => {
      const { driver } = await setup();
      await fill(driver, 3);
      const c = await shared(driver);
      const seen: string[] = [];
      await expect(
        (async () => {
          for await (const m of c.messages()) {
            seen.push(m.data as string);
            if (m.data === "m1") throw new Error("fail");
          }
        })(),
      ).rejects.toThrow("fail");
      expect(seen).toEqual(["m0", "m1"]);
      expect(c.floor.count).toBe(1);
      const [again] = await c.poll();
      expect(again).toMatchObject({ data: "m1", deliveries: 2 });
    });

    it("checks its options: E_OPTION", async () => {
      const { driver } = await setup();
      await fill(driver, 1);
      await expect(SharedConsumer.open("q", "s", { driver, maxInFlight: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(SharedConsumer.open("q", "s", { driver, deadLetterQueue: "q" })).rejects.toMatchObject({ code: "E_OPTION" });
      await expect(SharedConsumer.open("q", "s", { driver, maxInFlight: 10, maxAckWindow: 5 })).rejects.toMatchObject({ code: "E_OPTION" });
      const c = await shared(driver);
      await expect(c.poll({ max: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
    });

    it("a rate limit and a back-off: never more than max in any window, kept in the state across a restart", async () => {
      const { driver } = await setup();
      await fill(driver, 40);
      const leaseMs = 600_000;
      const limiter = { max: 4, durationMs: 300 };
      const times: number[] = [];
      let c = await shared(driver, { leaseMs, limiter });
      for (let round = 0; round < 3; round++) {
        const got = await c.poll({ max: 10, timeoutMs: WAKE_TIMEOUT_MS });
        expect(got).toHaveLength(4);
        times.push(...got.map((m) => handedOutAt(m, leaseMs)));
        for (const m of got) await c.ack(m);
        // Its next holder (here after a restart) goes on with the same window.
        await c.close();
        c = await shared(driver, { leaseMs, limiter });
      }
      expect(mostInAnyWindow(times, limiter.durationMs)).toBe(4);
      const until = await c.backOff(60_000);
      await c.close();
      c = await shared(driver, { leaseMs, limiter });
      expect(await c.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
      expect(c.stats.limitedUntil).toBe(until);
    }, 60_000);

    it("waiting polls wake for a new message pushed in this process", async () => {
      const { driver } = await setup();
      await fill(driver, 0);
      const c = await shared(driver);
      const polled = c.poll({ timeoutMs: 5000 });
      await sleep(30);
      const q = await QueueWriter.open("q", { driver, ...quiet });
      await q.push("late");
      const got = await polled;
      await q.close();
      expect(bodies(got)).toEqual(["late"]);
    });
  });
}
