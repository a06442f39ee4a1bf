// A shared consumer's ack inbox (src/consumers/state/ack-inbox.ts) on every driver: acks another instance took
// for it, applied by the holder, at open and while it runs, each answered with the holder's verdict.
import { afterEach, describe, expect, it, vi } from "vitest";
import { InboxPoster, VERDICT_KEEP_MS } from "../../src/consumers/state/ack-inbox";
import { INBOX_CHECK_MS } from "../../src/consumers/state/inbox-pace";
import { deleteConsumer } from "../../src/admin/delete";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import { sharedInboxDir } from "../../src/storage/paths";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { followOutcomes } from "../../src/consumers/shared/outcomes";
import { QueueWriter } from "../../src/writer/writer";
import type { EngineTestContext } from "./engine-suite";
import { sleep } from "../helpers/sleep";

type Ref = { part: number; offset: number; lease: number };
/** Acks as another instance posts them. */
const postAcks = (driver: QueueDriver, refs: Ref[], sync = false) =>
  new InboxPoster(driver, "other1", sync).post(
    "q",
    "work",
    refs.map((ref) => ({ kind: "ack", ref })),
  );

/** The inbox's files (what is posted and not applied yet), not the verdicts. */
const inboxFiles = async (driver: QueueDriver) => (await driver.list(sharedInboxDir("q", "work"))).filter((name) => !name.endsWith(".v"));
const refused = (message: RegExp) => ({ done: false, code: "E_LEASE", message: expect.stringMatching(message) });

/** Waits until `check` holds, looking every 20 ms, for a few inbox rounds at most. */
async function eventually(check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + INBOX_CHECK_MS * 6;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("not within a few inbox rounds");
    await sleep(20);
  }
}

export function ackInboxTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  describe("a shared consumer's ack inbox (acks another instance took)", () => {
    const opened: SharedConsumer[] = [];
    afterEach(async () => {
      for (const c of opened.splice(0)) if (!c.closed) await c.close().catch(() => {});
    });
    const filled = async (driver: QueueDriver, count: number) => {
      const q = await QueueWriter.open("q", { driver, durability: "none", onProblem: () => {} });
      await q.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
      await q.close();
    };
    const shared = async (driver: QueueDriver, problems: QueueProblem[] = []) => {
      const c = await SharedConsumer.open("q", "work", { driver, syncCommits: false, onProblem: (p) => problems.push(p) });
      opened.push(c);
      return c;
    };

    it("acks leases it handed out, drops an ack of a message never handed out and a damaged line (said), removes what it applied", async () => {
      const { driver } = await setup();
      await filled(driver, 6);
      const problems: QueueProblem[] = [];
      const c = await shared(driver, problems);
      const [m0, m1, m2, m3] = await c.poll({ max: 4, leaseMs: 60_000 });
      // m5 was never handed out (a made-up or mistaken ack); m3's line is damaged.
      const m5 = { part: m0!.part, offset: m3!.offset + (m3!.offset - m2!.offset) * 2, lease: m0!.lease };
      // Answered with the holder's verdict on each.
      expect(await postAcks(driver, [m0!, m2!, m5])).toEqual([{ done: true }, { done: true }, refused(/has not handed it out/)]);
      await driver.mkdir(sharedInboxDir("q", "work"));
      const damaged = await driver.openRecord(`${sharedInboxDir("q", "work")}/other2-1`, { create: true });
      await damaged!.replace(new TextEncoder().encode(`A;${m3!.part};${m3!.offset};${m3!.lease};123\n`));
      await damaged!.close();
      await eventually(() => c.stats.inFlight === 2);
      expect(c.stats.oldestUnacked).toMatchObject({ offset: m1!.offset });
      // The files go once their acks are written (the damaged one too: nothing in it can be applied, its line is refused).
      await eventually(async () => (await inboxFiles(driver)).length === 0);
      expect(problems.map((p) => p.code)).toEqual(["BAD_INFO"]);
      const verdict = new TextDecoder().decode(await driver.readRecord(`${sharedInboxDir("q", "work")}/other2-1.v`));
      expect(verdict).toMatch(/^R;E_CORRUPT;/);
      // The acked ones never come again; the one acked without a lease does.
      await c.ackAll([m1!, m3!]);
      const rest = await c.poll({ max: 10, timeoutMs: 0 });
      expect(rest.map((m) => m.data)).toEqual(["m4", "m5"]);
      await c.ackAll(rest);
      expect(c.stats.ackFloor.count).toBe(6);
    });

    it("is read at open: acks taken while nobody held the consumer count before anything goes out again; delete removes the inbox", async () => {
      const { driver } = await setup();
      await filled(driver, 4);
      const first = await shared(driver);
      const leased = await first.poll({ max: 4, leaseMs: 60_000 });
      // Closed with its leases running (its instance lost the partition): they would all come again.
      await first.close();
      const posted = postAcks(driver, leased.slice(0, 2), true);
      await eventually(async () => (await inboxFiles(driver)).length === 1);
      const next = await shared(driver);
      // Answered once the next holder applied them (at its open).
      expect(await posted).toEqual([{ done: true }, { done: true }]);
      // An ack of the earlier holder's lease reaching the new holder itself, before it read that far, is taken too.
      expect(await next.ackAll([leased[2]!])).toEqual([undefined]);
      const again = await next.poll({ max: 10, timeoutMs: 0 });
      expect(again.map((m) => [m.data, m.deliveries])).toEqual([["m3", 2]]);
      await next.ack(again[0]!);
      expect(next.stats.ackFloor.count).toBe(4);
      await next.close();
      void postAcks(driver, [again[0]!]).catch(() => {}); // nobody holds it: pending, then deleted
      await eventually(async () => (await inboxFiles(driver)).length === 1);
      await deleteConsumer(driver, "q", "work");
      expect(await driver.list(sharedInboxDir("q", "work"))).toEqual([]);
    });

    it("carries a result with an ack and a progress report, into the holder's outcomes; progress on a lease not held is refused", async () => {
      const { driver } = await setup();
      await filled(driver, 2);
      const c = await shared(driver);
      const [m0, m1] = await c.poll({ max: 2 });
      const poster = new InboxPoster(driver, "other1", false);
      const progress = JSON.stringify({ step: "2/3; \n half" });
      expect(await poster.post("q", "work", [{ kind: "progress", ref: m0!, progress }])).toEqual([{ done: true }]);
      expect(await poster.post("q", "work", [{ kind: "ack", ref: m0!, result: JSON.stringify(["ok", 1]) }])).toEqual([{ done: true }]);
      expect(await poster.post("q", "work", [{ kind: "progress", ref: { ...m1!, lease: m1!.lease + 1 }, progress: "1" }])).toEqual([
        refused(/handed out again since/),
      ]);
      const events = [];
      for await (const event of followOutcomes("q", "work", { driver, from: "oldest" })) if (events.push(event) === 2) break;
      expect(events.map((e) => [e.kind, e.offset, e.progress ?? e.result])).toEqual([
        ["progress", m0!.offset, { step: "2/3; \n half" }],
        ["completed", m0!.offset, ["ok", 1]],
      ]);
    });

    it("gives back (nack) and extends a lease still running here; one that is not (a wrong lease) is left alone", async () => {
      const { driver } = await setup();
      await filled(driver, 3);
      const c = await shared(driver);
      const leasedAt = Date.now();
      const [m0, m1, m2] = await c.poll({ max: 3, leaseMs: 1500 });
      const poster = new InboxPoster(driver, "other1", false);
      const until = Date.now() + 60_000;
      const posted = Promise.all([
        poster.post("q", "work", [{ kind: "nack", ref: m0!, delayMs: 0, release: false, deadLetter: false, error: "failed; elsewhere 🚀".slice(0, -1) }]),
        poster.post("q", "work", [{ kind: "extend", ref: m1!, until }]),
        poster.post("q", "work", [{ kind: "nack", ref: { ...m2!, lease: m2!.lease + 1 }, delayMs: 0, release: false, deadLetter: false }]),
      ]);
      // Posted in one turn: one file.
      await eventually(async () => (await inboxFiles(driver)).length === 1);
      // Each answered with its verdict: the wrong lease refused as a nack here is.
      expect(await posted).toEqual([[{ done: true }], [{ done: true, until }], [refused(/handed out again since/)]]);
      expect(c.stats.inFlight).toBe(2);
      const again = await c.poll({ max: 3, timeoutMs: 0 });
      expect(again.map((m) => [m.data, m.deliveries])).toEqual([["m0", 2]]);
      // m2's lease runs out (the wrong-lease nack did nothing), m1's was extended.
      await sleep(leasedAt + 1700 - Date.now());
      const later = await c.poll({ max: 3, timeoutMs: 0 });
      expect(later.map((m) => m.data)).toEqual(["m2"]);
      expect(c.stats.inFlight).toBe(3);
    });

    it("a nack without delayMs waits the message's backoff, else defaultDelayMs, else nothing, as a nack here does", async () => {
      const { driver } = await setup();
      const w = await QueueWriter.open("q", { driver, durability: "none", onProblem: () => {} });
      await w.produce(["own"], { backoff: { type: "fixed", delayMs: 60_000 } });
      await w.produce(["fallback", "none"]);
      await w.close();
      const c = await shared(driver);
      const [own, fallback, none] = await c.poll({ max: 3 });
      const poster = new InboxPoster(driver, "other1", false);
      const nack = { kind: "nack", release: false, deadLetter: false } as const;
      const verdicts = await Promise.all([
        poster.post("q", "work", [{ ...nack, ref: own!, defaultDelayMs: 0 }]),
        poster.post("q", "work", [{ ...nack, ref: fallback!, defaultDelayMs: 60_000 }]),
        poster.post("q", "work", [{ ...nack, ref: none! }]),
      ]);
      expect(verdicts.map(([v]) => v!.done)).toEqual([true, true, true]);
      expect((await c.poll({ max: 3, timeoutMs: 0 })).map((m) => m.data)).toEqual(["none"]);
      expect(c.stats.waiting).toBe(2);
    });

    it("reads the inbox before a lease that ran out goes out again: an extend, ack or nack posted in time counts", async () => {
      const { driver } = await setup();
      await filled(driver, 4);
      const c = await shared(driver);
      // The open read the inbox; the next timed read is INBOX_CHECK_MS later, after these leases ran out.
      const [m0, m1, m2] = await c.poll({ max: 3, leaseMs: 100 });
      const poster = new InboxPoster(driver, "other1", false);
      const posted = Promise.all([
        poster.post("q", "work", [{ kind: "extend", ref: m0!, until: Date.now() + 60_000 }]),
        poster.post("q", "work", [{ kind: "ack", ref: m1! }]),
        poster.post("q", "work", [{ kind: "nack", ref: m2!, delayMs: 60_000, release: false, deadLetter: false, error: "later" }]),
      ]);
      await eventually(async () => (await inboxFiles(driver)).length === 1);
      await sleep(150);
      // Extended, acknowledged, put off: none comes again; the one never handed out does.
      const again = await c.poll({ max: 4, timeoutMs: 0 });
      expect(again.map((m) => m.data)).toEqual(["m3"]);
      expect(c.stats).toMatchObject({ inFlight: 2, waiting: 1, redelivered: 0 });
      expect((await posted).map(([verdict]) => verdict!.done)).toEqual([true, true, true]);
    });

    it("refuses an ack read after its message went out again to another worker, as an ack here is refused", async () => {
      const { driver } = await setup();
      await filled(driver, 1);
      const c = await shared(driver);
      const [first] = await c.poll({ max: 1, leaseMs: 100 });
      await sleep(150);
      // Ran out, and handed out again before the holder read the ack posted for the first lease.
      const [second] = await c.poll({ max: 1, leaseMs: 60_000 });
      expect(second).toMatchObject({ data: "m0", deliveries: 2 });
      const [verdict] = await postAcks(driver, [first!]);
      expect(verdict).toEqual(refused(/with another worker now/));
      await expect(c.ack(first!)).rejects.toMatchObject({ code: "E_LEASE" });
      // Still the second worker's: its ack is taken.
      expect(c.stats.inFlight).toBe(1);
      await c.ack(second!);
    });

    it("removes a verdict nobody took (its poster gave up or died) a while after it first saw it", async () => {
      const { driver } = await setup();
      await filled(driver, 1);
      const c = await shared(driver);
      const dir = sharedInboxDir("q", "work");
      await driver.mkdir(dir);
      await driver.writeAtomic?.(`${dir}/gone1-1.v`, new TextEncoder().encode("D;0\n"), { sync: false });
      if (!driver.writeAtomic) {
        const file = await driver.openRecord(`${dir}/gone1-1.v`, { create: true });
        await file!.replace(new TextEncoder().encode("D;0\n"));
        await file!.close();
      }
      await sleep(INBOX_CHECK_MS * 2);
      expect(await driver.list(dir)).toEqual(["gone1-1.v"]);
      vi.useFakeTimers({ toFake: ["Date"] });
      try {
        vi.setSystemTime(Date.now() + VERDICT_KEEP_MS);
        await eventually(async () => (await driver.list(dir)).length === 0);
      } finally {
        vi.useRealTimers();
      }
      expect(c.stats.inFlight).toBe(0);
    });
  });
}
