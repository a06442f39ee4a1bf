import { execFileSync } from "node:child_process";
import { readdir } from "node:fs/promises";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueProblem } from "../../src/core/errors";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { readPartIndex } from "../../src/log/part-index";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const FIXTURES = resolve(import.meta.dirname, "../fixtures/v_queue-0.2.7");
const freshDir = useTempDirs("vq-index-fixture-");

async function unpack(tar: string): Promise<string> {
  const dir = await freshDir();
  execFileSync("tar", ["-xf", join(FIXTURES, tar), "-C", dir]);
  return join(dir, "q");
}

describe("parts the crate wrote have no index", () => {
  it("seeks by sequence and by time scan instead, and say so once per part", async () => {
    const dir = await unpack("basic-c1-first.tar");
    const driver = fsDriver({ dir });
    expect(await readPartIndex(driver, "basic_q", 0)).toBeUndefined();
    const problems: QueueProblem[] = [];
    const c = await QueueConsumer.open("basic_q", "fresh", { driver, onProblem: (p) => problems.push(p) });
    await c.seek({ part: 0, seq: 7 });
    expect((await c.read({ max: 1 }))[0]!.data).toBe("msg-6");
    await c.seek({ part: 0, seq: 3 });
    expect((await c.read({ max: 1 }))[0]!.data).toBe("msg-2");
    expect(problems.filter((p) => p.code === "NO_INDEX").map((p) => p.part)).toEqual([0]);
    // Time unknown: an index-less part counts as older than any time, the newest part holds the rest.
    await c.seek({ time: Date.now() - 1000 });
    expect((await c.read({ max: 1 }))[0]!.data).toBe("msg-10");
    await c.close();
  });

  it("a v-queue writer indexes the crate's part it recovers; the crate's other parts stay as they are", async () => {
    const dir = await unpack("basic-c1-first.tar");
    const driver = fsDriver({ dir });
    const problems: QueueProblem[] = [];
    const q = await QueueWriter.open("basic_q", { driver, onProblem: (p) => problems.push(p), indexInterval: 2 });
    expect(problems).toEqual([]); // a part without an index is indexed quietly (a damaged index would be said)
    expect((await readPartIndex(driver, "basic_q", 1))!.map((e) => e.seq)).toEqual([1, 3, 5, 6]); // recovered, then sealed by the roll
    expect(await readdir(join(dir, "basic_q-0"))).not.toContain("basic_q_index");
    await q.close();
  });
});
