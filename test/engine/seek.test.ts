import { readdir, rm } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueDriver } from "../../src/core/driver";
import { QueueWriter } from "../../src/writer/writer";
import { partIndexPath, partPath } from "../../src/storage/paths";
import { patchLog } from "../helpers/damage";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const texts = (messages: { data: unknown }[]) => messages.map((m) => m.data);

describe("consumer.seek", () => {
  it("moves to the oldest message, the end, a cursor, or a message by part and sequence, and saves it", async () => {
    const driver = memoryDriver();
    let q = await QueueWriter.open("q", { driver });
    await q.pushBatch(["a", "b", "c"]);
    await q.close();
    q = await QueueWriter.open("q", { driver }); // part 1
    await q.pushBatch(["d", "e"]);
    const c = await QueueConsumer.open("q", "c", { driver });
    const all = await c.read({ max: 100 });
    expect(texts(all)).toEqual(["a", "b", "c", "d", "e"]);
    await c.commit();

    await c.seek("earliest");
    expect(texts(await c.read({ max: 2 }))).toEqual(["a", "b"]);
    await c.seek({ part: 1, seq: 2 });
    expect(texts(await c.read())).toEqual(["e"]);
    await c.seek(`0.${all[1]!.offset + 25 + all[1]!.size}.2`); // the cursor after "b"
    expect(texts(await c.read({ max: 1 }))).toEqual(["c"]);
    await c.seek("latest");
    expect(await c.read()).toEqual([]);
    await q.push("f");
    expect(texts(await c.read())).toEqual(["f"]);

    // Saved: a reopened consumer resumes at the last seek, backwards included.
    await c.seek({ part: 0, seq: 3 });
    await c.close();
    const again = await QueueConsumer.open("q", "c", { driver });
    expect(texts(await again.read({ max: 100 }))).toEqual(["c", "d", "e", "f"]);

    for (const bad of ["9.0.0", "0.3.1", { part: 0, seq: 9 }, { part: 5, seq: 1 }, { part: -1, seq: 1 }] as const) {
      await expect(again.seek(bad), JSON.stringify(bad)).rejects.toMatchObject({ code: "E_CURSOR" });
    }
    await again.close();
    await q.close();
  });
});

describe("consumer.seek by time, the parts listed once", () => {
  const freshDir = useTempDirs("vq-seek-");

  /** Writes `parts` parts of 20 messages each (`tag`0..; a writer opened again starts a part), a few ms apart; the time before each part. */
  async function writeParts(driver: QueueDriver, tag: string, parts: number): Promise<number[]> {
    const before: number[] = [];
    for (let part = 0; part < parts; part++) {
      await sleep(5);
      before.push(Date.now());
      await sleep(5);
      const q = await QueueWriter.open("q", { driver, indexInterval: 5 });
      for (let i = 0; i < 20; i++) await q.push(`${tag}${part * 20 + i}`.padEnd(30, "."));
      await q.close();
    }
    return before;
  }
  const first = async (c: QueueConsumer) => ((await c.read({ max: 1 }))[0]?.data as string).replace(/\.+$/, "");

  it("sees parts written, deleted by retention, and a queue made anew since the last seek", async () => {
    const dir = freshDir();
    const driver = fsDriver({ dir });
    const old = await writeParts(driver, "a", 3);
    const c = await QueueConsumer.open("q", "c", { driver, syncCommits: false });
    await c.seek({ time: old[1]! });
    expect(await first(c)).toBe("a20");

    // Parts written after the listing: found (the newest part in the info line is not the last listed).
    const q = await QueueWriter.open("q", { driver, indexInterval: 5 });
    await sleep(5);
    const later = Date.now();
    await sleep(5);
    for (let i = 0; i < 40; i++) await q.push(`b${i}`.padEnd(30, "."));
    await q.close();
    await c.seek({ time: later });
    expect(await first(c)).toBe("b0");

    // The oldest parts deleted as retention does: the oldest left is the start.
    await rm(join(dir, "q-0"), { recursive: true });
    await rm(join(dir, "q-1"), { recursive: true });
    await c.seek({ time: old[0]! });
    expect(await first(c)).toBe("a40");
    await c.close();

    // The queue removed and made anew with as many parts: the parts the listing had are there
    // again, and the newest is the same, but there are older ones now.
    for (const name of await readdir(dir)) await rm(join(dir, name), { recursive: true });
    const anew = await writeParts(driver, "n", 4);
    const again = await QueueConsumer.open("q", "c", { driver, syncCommits: false });
    await again.seek({ time: anew[0]! - 1000 });
    expect(await first(again)).toBe("n0");
    await again.seek({ time: anew[3]! });
    expect(await first(again)).toBe("n60");
    await again.close();
  });
});

describe("consumer.seek by sequence", () => {
  const freshDir = useTempDirs("vq-seek-seq-");

  it("lands on the very record at, between and around index entries, past a record whose body is damaged, and without an index", async () => {
    const dir = freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("q", { driver, indexInterval: 4 });
    // Bodies of many sizes (one past a read chunk of 64 KiB): record boundaries fall anywhere.
    const bodies = Array.from({ length: 30 }, (_, i) => `m${i}:`.padEnd(i === 17 ? 70_000 : 1 + ((i * 37) % 300), "x"));
    const pushed = await q.pushBatch(bodies);
    await q.close();
    const c = await QueueConsumer.open("q", "c", { driver, syncCommits: false, onProblem: () => {} });
    const seekEach = async () => {
      for (let seq = 1; seq <= 30; seq++) {
        if (seq === 11) continue; // the damaged one (below)
        expect(await c.seek({ part: 0, seq }), `seq ${seq}`).toBe(`0.${pushed[seq - 1]!.offset}.${seq - 1}`);
        expect(((await c.read({ max: 1 }))[0]?.data as string).split(":")[0], `seq ${seq}`).toBe(`m${seq - 1}`);
      }
      expect(await c.seek({ part: 0, seq: 31 })).toMatch(/^0\.\d+\.30$/); // the end: the next message to come
      await expect(c.seek({ part: 0, seq: 32 })).rejects.toMatchObject({ code: "E_CURSOR" });
    };
    await seekEach();
    // A byte of record 11's body changed: the records after it are still found where they are.
    await patchLog(driver, partPath("q", 0), [[pushed[10]!.offset + 25 + 2, new Uint8Array([0x21])]]);
    await seekEach();
    expect(await c.seek({ part: 0, seq: 11 })).toBe(`0.${pushed[10]!.offset}.10`);
    // No index: scanned from the part's start.
    await rm(join(dir, partIndexPath("q", 0)));
    await seekEach();
    await c.close();
  });
});
