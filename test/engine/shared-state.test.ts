import { appendFile, readFile, stat } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { positionAfter } from "../../src/cursor";
import type { QueueProblem } from "../../src/errors";
import { sharedJournalPath, sharedStatePath } from "../../src/paths";
import { SharedConsumer } from "../../src/shared-consumer";
import { QueueWriter } from "../../src/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-shared-state-");

async function filled(count: number) {
  const dir = await freshDir();
  const driver = fsDriver({ dir });
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  await q.pushBatch(Array.from({ length: count }, (_, i) => `m${i}`));
  await q.close();
  return { dir, driver };
}

describe("a shared consumer's state files (fs)", () => {
  it("fold the journal into the snapshot as the floor moves: the files stay small however many acks", async () => {
    const { dir, driver } = await filled(5000);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    for (let batch = await c.poll({ max: 100, timeoutMs: 0 }); batch.length > 0; batch = await c.poll({ max: 100, timeoutMs: 0 })) {
      // Out of order within each batch: acks above the floor, then the floor catches up.
      await Promise.all([...batch].reverse().map((m) => c.ack(m)));
    }
    expect(c.floor.count).toBe(5000);
    const journal = await stat(join(dir, sharedJournalPath("q", "s"))).catch(() => undefined);
    expect(journal?.size ?? 0).toBeLessThan(64 * 1024 + 8 * 1024);
    await c.close();
    // Closed at the floor: the snapshot is its header line only, and the journal is gone.
    expect((await readFile(join(dir, sharedStatePath("q", "s")), "utf8")).split("\n").filter(Boolean)).toHaveLength(1);
    expect(await stat(join(dir, sharedJournalPath("q", "s"))).catch(() => undefined)).toBeUndefined();
  });

  it("skip a torn journal line (reported), keep every whole one", async () => {
    const { dir, driver } = await filled(3);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    const [m0, m1, m2] = await c.poll({ max: 3 });
    await c.ack(m1!);
    await c.close();
    // The snapshot: the header, the high-water mark after m2 (m0 and m2 handed out once), m1's ack.
    const lines = (await readFile(join(dir, sharedStatePath("q", "s")), "utf8")).split("\n").filter(Boolean);
    const after = positionAfter(m2!);
    expect(lines.map((l) => l.split(";").slice(0, -1).join(";"))).toEqual(["H;v-queue-shared;1", `W;0;${after.position};${after.count}`, `A;0;${m1!.offset}`]);
    // What a crash in the middle of an append leaves: no crc, no newline.
    await appendFile(join(dir, sharedJournalPath("q", "s")), "A;0;999;12");
    const problems: QueueProblem[] = [];
    const again = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: (p) => problems.push(p) });
    expect(problems.map((p) => p.code)).toEqual(["BAD_INFO"]);
    const got = await again.poll({ max: 5 });
    expect(got.map((m) => m.data)).toEqual([m0!.data, m2!.data]);
    await again.close();
  });
});
