import { appendFile, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { ConsumerPosition } from "../../src/format/position";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { deleteQueue } from "../../src/admin/delete";
import { consumerLag, inspectQueue } from "../../src/inspect/queues";
import { readPartEnd } from "../../src/log/position-check";
import { isWriterGone, listParts, readQueueInfo } from "../../src/log/recovery";
import { invalidateTotals, queueTotals, type PartTotals } from "../../src/log/totals";
import { QueueWriter } from "../../src/writer/writer";
import { seededRandom } from "../helpers/random";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-totals-");
const quiet = () => {};

/** The walk the totals replace (inspect.ts before issue 12): every part's end read afresh. */
async function walk(driver: QueueDriver, queue: string): Promise<{ currentPart: number; parts: PartTotals[] } | undefined> {
  const info = await readQueueInfo(driver, queue, quiet);
  const ids = await listParts(driver, queue);
  if (!info && ids.length === 0) return undefined;
  const current = Math.max(info?.part ?? -1, ids.at(-1) ?? -1);
  const gone = ids.length > 0 && (await isWriterGone(driver, queue));
  const parts: PartTotals[] = [];
  for (const id of ids) {
    const end = await readPartEnd(driver, queue, id, gone || id !== current);
    parts.push({ id, bytes: end.edge, messages: end.count });
  }
  return { currentPart: current, parts };
}

function lagIn(parts: PartTotals[], position: ConsumerPosition): number {
  let lag = 0;
  for (const part of parts) {
    if (part.id === position.part) lag += Math.max(0, part.messages - position.count);
    else if (part.id > position.part) lag += part.messages;
  }
  return lag;
}

/** Another process's view of the same files: its own storageKey, so it shares no in-process state. */
const otherProcess = (dir: string): QueueDriver => ({ ...fsDriver({ dir }), storageKey: `other-process:${dir}` });

/** Every driver call counted (same storageKey: the same process's view). */
function counting(driver: QueueDriver): { driver: QueueDriver; calls: string[] } {
  const calls: string[] = [];
  const wrapped: Record<string, unknown> = { ...driver };
  for (const [key, value] of Object.entries(driver)) {
    if (typeof value === "function") wrapped[key] = (...args: unknown[]) => (calls.push(key), (value as (...a: unknown[]) => unknown)(...args));
  }
  return { driver: wrapped as unknown as QueueDriver, calls };
}

async function expectTotalsEqualWalk(driver: QueueDriver, queue: string, label: string): Promise<void> {
  const want = await walk(driver, queue);
  const got = await queueTotals(driver, queue);
  if (!want) return expect(got, label).toBeUndefined();
  expect(got, label).toBeDefined();
  const messages = want.parts.reduce((sum, p) => sum + p.messages, 0);
  const bytes = want.parts.reduce((sum, p) => sum + p.bytes, 0);
  expect({ currentPart: got!.currentPart, parts: got!.parts(), messages: got!.messages, bytes: got!.bytes }, label).toEqual({
    currentPart: want.currentPart,
    parts: want.parts,
    messages,
    bytes,
  });
  const positions: ConsumerPosition[] = [
    { part: 0, position: 0, count: 0 },
    { part: want.currentPart + 1, position: 0, count: 0 },
  ];
  for (const p of want.parts)
    for (const count of [0, 1, p.messages - 1, p.messages, p.messages + 1]) positions.push({ part: p.id, position: 0, count: Math.max(0, count) });
  for (const position of positions) expect(got!.lagAfter(position), `${label} lag after ${JSON.stringify(position)}`).toBe(lagIn(want.parts, position));
}

describe("running totals (issue 12)", () => {
  // Date only: the once-a-second listing is then driven by the test; timers run for real.
  beforeEach(() => void vi.useFakeTimers({ toFake: ["Date"] }));
  afterEach(() => void vi.useRealTimers());
  const aSecondLater = () => vi.setSystemTime(Date.now() + 1100);

  for (const seed of [1, 2, 3, 4]) {
    it(`equal a fresh walk after random pushes, rolls, reopens, crashes and deletions (seed ${seed})`, async () => {
      const dir = await freshDir();
      const driver = fsDriver({ dir });
      const other = otherProcess(dir);
      const random = seededRandom(seed);
      const pick = (n: number) => Math.floor(random() * n);
      let writer: QueueWriter | undefined;
      const open = async () =>
        (writer = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: 1024, rollOnOpen: random() < 0.5, onProblem: quiet }));
      const batch = () => Array.from({ length: 1 + pick(6) }, (_, i) => `${i}:${"m".repeat(pick(600))}`);
      await open();
      for (let step = 0; step < 40; step++) {
        const action = pick(10);
        if (action < 5) await (writer ?? (await open())).pushBatch(batch());
        else if (action === 5) {
          await writer?.close();
          await open();
        } else if (action === 6 && writer) {
          // A crash: records past a lagging push info line, maybe a torn record after them.
          const info = join(dir, `q-${writer.position.part}/q_info_push`);
          const lagging = await readFile(info);
          const part = writer.position.part;
          await writer.pushBatch(batch());
          await writer.close();
          writer = undefined;
          if (part === (await listParts(driver, "q")).at(-1)) await writeFile(info, lagging);
          if (random() < 0.5) await appendFile(join(dir, `q-${part}/q_queue`), Buffer.alloc(7 + pick(30), 0xee));
        } else if (action === 7) {
          // Another process removes the oldest sealed parts (retention): out within about a second.
          const ids = await listParts(driver, "q");
          for (const id of ids.slice(0, Math.min(ids.length - 1, 1 + pick(3)))) await rm(join(dir, `q-${id}`), { recursive: true });
          aSecondLater();
        } else if (action === 8) aSecondLater();
        else await writer?.close().then(() => (writer = undefined));
        await expectTotalsEqualWalk(driver, "q", `seed ${seed} step ${step} (writer's process)`);
        await expectTotalsEqualWalk(other, "q", `seed ${seed} step ${step} (another process)`);
      }
      await writer?.close();
    });
  }

  it("lag() in the writer's process costs no driver call once recovered, whatever the number of parts", async () => {
    const steady: string[][] = [];
    for (const parts of [20, 200]) {
      const dir = await freshDir();
      const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none", maxPartBytes: 1024, onProblem: quiet });
      const message = "x".repeat(487); // 512 bytes with its header: two fill a part
      await writer.pushBatch(Array.from({ length: 2 * parts - 1 }, () => message));
      const { driver, calls } = counting(fsDriver({ dir }));
      const consumer = await QueueConsumer.open("q", "c", { driver, start: "earliest", syncCommits: false });
      await consumer.read({ max: 3 });
      await consumer.commit();
      calls.length = 0;
      expect(await consumer.lag()).toBe(2 * parts - 4);
      expect(calls.length).toBeGreaterThan(parts); // the one walk, on first use
      await writer.pushBatch([message, message, message]); // rolls twice
      calls.length = 0;
      expect(await consumer.lag()).toBe(2 * parts - 1);
      steady.push([...calls]);
      expect((await inspectQueue(driver, "q"))?.messages).toBe(2 * parts + 2);
      await consumer.close();
      await writer.close();
    }
    expect(steady).toEqual([[], []]);
  });

  it("stay right when the writer here rolls while the first call walks the parts", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const writer = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: 1024, onProblem: quiet });
    const message = "x".repeat(487);
    await writer.pushBatch(Array.from({ length: 399 }, () => message));
    const start = { part: 0, position: 0, count: 0 };
    for (let round = 0; round < 5; round++) {
      invalidateTotals(driver, "q");
      const before = writer.position;
      const [lag] = await Promise.all([consumerLag(driver, "q", start), writer.pushBatch(Array.from({ length: 20 }, () => message))]);
      expect(writer.position.part).toBeGreaterThan(before.part);
      expect(lag).toBeGreaterThanOrEqual(399 + 20 * round);
      expect(lag).toBeLessThanOrEqual(399 + 20 * (round + 1));
      await expectTotalsEqualWalk(driver, "q", `round ${round}`);
    }
    await writer.close();
  });

  it("lag() in another process costs a few small reads, whatever the number of parts", async () => {
    const counts: number[] = [];
    for (const parts of [20, 200]) {
      const dir = await freshDir();
      const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none", maxPartBytes: 1024, onProblem: quiet });
      await writer.pushBatch(Array.from({ length: 2 * parts - 1 }, () => "x".repeat(487)));
      const { driver, calls } = counting(otherProcess(dir));
      const consumer = await QueueConsumer.open("q", "c", { driver, start: "earliest", syncCommits: false });
      await consumer.lag();
      await writer.push("y"); // read from the push info line
      calls.length = 0;
      expect(await consumer.lag()).toBe(2 * parts);
      counts.push(calls.length);
      await consumer.close();
      await writer.close();
    }
    expect(counts[0]).toBe(counts[1]);
    expect(counts[0]).toBeLessThanOrEqual(5);
  });

  it("forgets parts removed in this process at once with invalidateTotals, and a purged queue entirely", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    let writer = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: 1024, onProblem: quiet });
    await writer.pushBatch(Array.from({ length: 9 }, () => "x".repeat(487)));
    expect((await queueTotals(driver, "q"))?.messages).toBe(9);
    await rm(join(dir, "q-0"), { recursive: true });
    invalidateTotals(driver, "q", "listing");
    expect((await queueTotals(driver, "q"))?.parts().map((p) => p.id)).toEqual([1, 2, 3, 4]);
    await writer.close();
    for (const name of await listParts(driver, "q")) await rm(join(dir, `q-${name}`), { recursive: true });
    await rm(join(dir, "q_info_queue"));
    invalidateTotals(driver, "q");
    expect(await queueTotals(driver, "q")).toBeUndefined();
    writer = await QueueWriter.open("q", { driver, durability: "none", onProblem: quiet });
    await writer.pushBatch(["a", "b"]);
    await expectTotalsEqualWalk(driver, "q", "made again");
    expect((await queueTotals(driver, "q"))?.messages).toBe(2);
    await writer.close();
  });

  it("forget a queue another process deleted and made again (part ids start over at 0) within about a second", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const other = otherProcess(dir);
    let writer = await QueueWriter.open("q", { driver, durability: "none", maxPartBytes: 1024, onProblem: quiet });
    await writer.pushBatch(Array.from({ length: 12 }, () => "x".repeat(487))); // parts 0..5, two each
    await writer.close();
    await expectTotalsEqualWalk(driver, "q", "before");
    await deleteQueue(other, "q");
    writer = await QueueWriter.open("q", { driver: other, durability: "none", maxPartBytes: 1024, onProblem: quiet });
    await writer.pushBatch(Array.from({ length: 9 }, () => "y".repeat(100))); // parts 0..1 of the new queue, other sizes
    await writer.pushBatch(Array.from({ length: 9 }, () => "y".repeat(100)));
    await writer.close();
    aSecondLater();
    await expectTotalsEqualWalk(driver, "q", "made again by another process");
  });
});

describe("running totals across processes", () => {
  it("follow a writer in another process as it pushes and rolls, and equal the walk once it is killed", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const child = startChild("pusher", dir, "t", "4", "1024");
    await child.waitFor((line) => line === "ready");
    let lastPart = 0;
    for (let round = 0; round < 8; round++) {
      await child.waitFor((line) => line === `ack ${40 * (round + 1)}`, 20_000);
      const acked = child.lines.filter((line) => line.startsWith("ack ")).length;
      const totals = (await queueTotals(driver, "crash"))!;
      expect(totals.messages).toBeGreaterThanOrEqual(acked);
      expect(totals.currentPart).toBeGreaterThanOrEqual(lastPart);
      lastPart = totals.currentPart;
    }
    expect(lastPart).toBeGreaterThan(5);
    child.process.kill("SIGKILL");
    await child.exited;
    const walked = (await walk(driver, "crash"))!;
    expect((await queueTotals(driver, "crash"))!.messages).toBe(walked.parts.reduce((sum, p) => sum + p.messages, 0));
    // Killed mid-roll, the writer can leave a new (empty) part that the queue info line does not
    // name yet: it joins the parts list at the next listing, within a second.
    await sleep(1100);
    await expectTotalsEqualWalk(driver, "crash", "after kill -9");
  }, 60_000);
});
