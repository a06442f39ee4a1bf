import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueProblem } from "../../src/core/errors";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { listParts } from "../../src/log/recovery";
import { QueueWriter } from "../../src/writer/writer";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-life-proc-");

describe("retention in another process, on files", () => {
  it("a reader with the deleted part open finishes it (POSIX keeps it readable), then is told exactly what it missed", async () => {
    const dir = await freshDir();
    for (let p = 0; p < 3; p++) {
      const q = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none" });
      await q.pushBatch(Array.from({ length: 10 }, (_, i) => `m${p * 10 + i}`));
      await q.close();
    }
    const problems: QueueProblem[] = [];
    const c = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir }), onProblem: (p) => problems.push(p), readChunkBytes: 4096 });
    const got = (await c.read({ max: 3 })).map((m) => m.data);
    const child = startChild("prune", dir, "q", "1");
    const line = await child.waitFor((l) => l.startsWith("{"));
    expect(JSON.parse(line)).toMatchObject({ messages: 20, deleted: [{ part: 0 }, { part: 1 }] });
    expect(await child.exited).toBe(0);
    expect(await listParts(fsDriver({ dir }), "q")).toEqual([2]);
    for (let batch = await c.read({ max: 4 }); batch.length > 0; batch = await c.read({ max: 4 })) got.push(...batch.map((m) => m.data));
    expect(got).toEqual([...Array.from({ length: 10 }, (_, i) => `m${i}`), ...Array.from({ length: 10 }, (_, i) => `m${20 + i}`)]);
    expect(problems.map((p) => [p.code, p.missed])).toEqual([["MISSED", 10]]);
    await c.close();
  }, 30_000);
});
