// What a shared consumer reads and writes to hand out messages of a priority ahead of its
// head (consumers/shared/priority.ts), as issue 40's drain with priorities does: one run after
// another of the same part costs the bytes of the run, not a chunk and a look at the queue's
// files each; the floor is not saved at each poll; the acks held ahead of the floor are not
// written again at every 64 KiB of journal.
import { expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { attributesPath, partPath, popInfoPath, pushInfoPath, sharedJournalPath, sharedStatePath } from "../../src/storage/paths";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-shared-priority-io-");

/**
 * The fs driver, counting the bytes read from part 0 (and its handles open), the reads of its push info line, the saves
 * of shared consumer "s"'s pop line, and the bytes of each of its snapshots and of its journal between them.
 */
function counted(dir: string) {
  const inner = fsDriver({ dir });
  const reads = { partBytes: 0, pushInfo: 0, partOpen: 0 };
  /** Per snapshot written: its bytes, and the journal's bytes appended since the one before. */
  const snapshots: { bytes: number; journal: number }[] = [];
  let journal = 0;
  let floorSaves = 0;
  const driver: QueueDriver = {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      if (!log || (path !== partPath("q", 0) && path !== sharedJournalPath("q", "s"))) return log;
      if (path === partPath("q", 0)) reads.partOpen++;
      return {
        ...log,
        size: () => log.size(),
        append: (at, data, fence) => ((journal += path === sharedJournalPath("q", "s") ? data.length : 0), log.append(at, data, fence)),
        truncate: (length, fence) => log.truncate(length, fence),
        sync: () => log.sync(),
        close: () => (path === partPath("q", 0) && reads.partOpen--, log.close()),
        async read(position, length) {
          const bytes = await log.read(position, length);
          if (path === partPath("q", 0)) reads.partBytes += bytes.length;
          return bytes;
        },
      };
    },
    writeAtomic(path, data, options) {
      if (path === sharedStatePath("q", "s")) {
        snapshots.push({ bytes: data.length, journal });
        journal = 0;
      }
      return inner.writeAtomic!(path, data, options);
    },
    async openRecord(path, options) {
      const record = await inner.openRecord(path, options);
      if (!record || (path !== pushInfoPath("q", 0) && path !== popInfoPath("q", "s"))) return record;
      return {
        ...record,
        replace: (data, fence) => (path === popInfoPath("q", "s") && floorSaves++, record.replace(data, fence)),
        sync: () => record.sync(),
        close: () => record.close(),
        read: () => (reads.pushInfo++, record.read()),
      };
    },
  };
  return { driver, reads, snapshots, floorSaves: () => floorSaves };
}

it("hands out 200 runs of a priority ahead of the head reading about the part once more, not a chunk and the push info per run, nor saving the floor at each poll", async () => {
  const { driver, reads, floorSaves } = counted(await freshDir());
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  // Each turn: 20 plain messages, then one of a priority (1..9 in turn), as the bench's mix.
  const runs = 200;
  for (let turn = 0; turn < runs; turn++) {
    await q.pushBatch(Array.from({ length: 20 }, (_, i) => `low-${turn}-${i}`.padEnd(100, ".")));
    await q.produce([`urgent-${turn}`.padEnd(100, ".")], { priority: 1 + (turn % 9) });
  }
  await q.close(); // no writer in this process: the part files are the truth
  const partBytes = await (await driver.openLog(partPath("q", 0), { create: false }))!.size();
  const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
  try {
    const seen: string[] = [];
    let polls = 0;
    for (;;) {
      polls++;
      const batch = await c.poll({ max: 20, timeoutMs: 0 });
      if (batch.length === 0) break;
      seen.push(...batch.map((m) => m.data as string));
      await c.ackAll(batch);
    }
    expect(seen).toHaveLength(runs * 21);
    expect(new Set(seen).size).toBe(runs * 21);
    // All of a priority went out first (but every FAIR_EVERY-th hand-out, the oldest's turn).
    expect(seen.slice(0, runs).filter((data) => data.startsWith("urgent")).length).toBeGreaterThan(runs * 0.8);
    // The head reads the part once; reading ahead, about once more (a chunk holds several runs).
    expect(reads.partBytes).toBeLessThan(3 * partBytes);
    // The push info line says where the part ends: asked when the reader reaches that end, not per run.
    expect(reads.pushInfo).toBeLessThan(runs / 4);
    // The floor moves at each poll (the oldest's turns) while acks wait ahead of the head: its
    // pop line is saved every 200 ms then (an fsync each), not at each poll as when caught up.
    expect(floorSaves()).toBeLessThan(polls / 4);
  } finally {
    await c.close();
  }
});

it("writes a snapshot of the acks held above the floor (messages of a priority acknowledged ahead of the head) once the journal outgrew the last one, not at every 64 KiB", async () => {
  const { driver, snapshots } = counted(await freshDir());
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  // Of every 100 messages, 70 plain then 30 of one priority (1..9 in turn).
  const turns = 400;
  for (let turn = 0; turn < turns; turn++) {
    await q.pushBatch(Array.from({ length: 70 }, (_, i) => `low-${turn}-${i}`));
    await q.produce(
      Array.from({ length: 30 }, (_, i) => `urgent-${turn}-${i}`),
      { priority: 1 + (turn % 9) },
    );
  }
  await q.close();
  const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
  try {
    let count = 0;
    for (;;) {
      const batch = await c.poll({ max: 100, timeoutMs: 0 });
      if (batch.length === 0) break;
      count += batch.length;
      await c.ackAll(batch);
    }
    expect(count).toBe(turns * 100);
    expect(c.floor.count).toBe(turns * 100);
  } finally {
    await c.close();
  }
  // Each snapshot holds the acks above the floor (thousands of lines here): the next one comes
  // once the journal outgrew it (and 64 KiB), not at every 64 KiB. The first two: the consumer's
  // creation and its open; the last: its close.
  expect(snapshots.length).toBeGreaterThan(4);
  expect(Math.max(...snapshots.map((s) => s.bytes))).toBeGreaterThan(64 * 1024);
  for (let i = 2; i < snapshots.length - 1; i++) expect(snapshots[i]!.journal).toBeGreaterThan(Math.max(64 * 1024, snapshots[i - 1]!.bytes));
});

it("reads nothing more once closed: a poll that meets the close hands out none of a priority ahead of the head, nor the oldest's turn; the close leaves the part closed", async () => {
  const { driver, reads } = counted(await freshDir());
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  await q.pushBatch(["a", "b", "c"]);
  await q.produce(["urgent"], { priority: 5 });
  await q.close();
  const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
  // The poll's take runs once the close began: a lease it gave could not be acknowledged any more.
  const polled = c.poll({ max: 5, timeoutMs: 0 });
  const closed = c.close();
  expect(await polled).toEqual([]);
  await closed;
  // The next holder hands them all out for the first time.
  const next = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
  try {
    const leased = await next.poll({ max: 5, timeoutMs: 0 });
    expect(leased.map((m) => [m.data, m.deliveries])).toEqual([
      ["urgent", 1],
      ["a", 1],
      ["b", 1],
      ["c", 1],
    ]);
  } finally {
    await next.close();
  }
  // The reader of runs ahead of the head closes with the consumer too.
  expect(reads.partOpen).toBe(0);
});

it("a plain queue whose writer is gone: the attributes file is looked for once per stretch of the part read, not at each poll", async () => {
  const dir = freshDir();
  const inner = fsDriver({ dir });
  let looks = 0;
  const driver: QueueDriver = {
    ...inner,
    openLog: (path, options) => (path === attributesPath("q", 0) && looks++, inner.openLog(path, options)),
  };
  const writer = await QueueWriter.open("q", { driver: inner, durability: "none" });
  for (let i = 0; i < 20; i++) await writer.pushBatch(Array.from({ length: 100 }, (_, k) => `m${i * 100 + k}`));
  await writer.close();
  const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: () => {} });
  try {
    let got = 0;
    let polls = 0;
    while (got < 2000) {
      const batch = await c.poll({ max: 10, timeoutMs: 1000 });
      polls++;
      got += batch.length;
      await c.ackAll(batch);
    }
    expect(polls).toBeGreaterThanOrEqual(200);
    // The part (about 40 KiB) is known whole at the first read: one look covers all of it.
    expect(looks).toBeLessThanOrEqual(3);
  } finally {
    await c.close();
  }
});

it("a priority produced after a look that found no attributes file is still found for the records after it", async () => {
  const dir = freshDir();
  const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none" });
  await writer.pushBatch(["a", "b"]);
  // Another process's reader (its own driver): no writer in its process, so it looks by itself.
  const c = await SharedConsumer.open("q", "s", { driver: fsDriver({ dir }), syncCommits: false, onProblem: () => {} });
  try {
    const first = await c.poll({ max: 2 });
    expect(first.map((m) => m.priority)).toEqual([undefined, undefined]);
    await writer.produce(["urgent"], { priority: 7 });
    const [m] = await c.poll({ max: 1, timeoutMs: 5000 });
    expect(m).toMatchObject({ data: "urgent", priority: 7 });
  } finally {
    await c.close();
    await writer.close();
  }
});
