// What a shared consumer reads to hand out messages of a priority ahead of its head
// (consumers/shared/priority.ts): one run after another of the same part costs the bytes of
// the run, not a chunk and a look at the queue's files each (issue 40's drain with priorities).
import { expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { partPath, pushInfoPath } from "../../src/storage/paths";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-shared-priority-reads-");

/** The fs driver, counting the bytes read from part 0 and the reads of its push info line. */
function counted(dir: string) {
  const inner = fsDriver({ dir });
  const reads = { partBytes: 0, pushInfo: 0 };
  const driver: QueueDriver = {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      if (!log || path !== partPath("q", 0)) return log;
      return {
        ...log,
        size: () => log.size(),
        append: (at, data, fence) => log.append(at, data, fence),
        truncate: (length, fence) => log.truncate(length, fence),
        sync: () => log.sync(),
        close: () => log.close(),
        async read(position, length) {
          const bytes = await log.read(position, length);
          reads.partBytes += bytes.length;
          return bytes;
        },
      };
    },
    async openRecord(path, options) {
      const record = await inner.openRecord(path, options);
      if (!record || path !== pushInfoPath("q", 0)) return record;
      return {
        ...record,
        replace: (data, fence) => record.replace(data, fence),
        sync: () => record.sync(),
        close: () => record.close(),
        read: () => (reads.pushInfo++, record.read()),
      };
    },
  };
  return { driver, reads };
}

it("hands out 200 runs of a priority ahead of the head reading about the part once more, not a chunk and the push info per run", async () => {
  const { driver, reads } = counted(await freshDir());
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
    for (;;) {
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
  } finally {
    await c.close();
  }
});
