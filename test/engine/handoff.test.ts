import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { readWant, writeWant } from "../../src/instances/handoff";
import { Members } from "../../src/instances/members";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { writerWantPath } from "../../src/storage/paths";
import { partitionName, partitionOfKey } from "../../src/partitions/declaration";
import { writeWhole } from "../../src/storage/write-whole";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-handoff-");

describe("hand-over requests", () => {
  it("carry how many instances the asker counts, and whether they are forced; a marker of an older version reads without", async () => {
    const driver = memoryDriver({ name: "handoff-markers" });
    await writeWant(driver, "q.p0_info_wantc_c", "a1", { members: 3 });
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toEqual({ by: "a1", members: 3 });
    // A forced request (a seek) says so.
    await writeWant(driver, "q.p1_info_wantc_c", "a1", { force: true });
    expect(await readWant(driver, "q.p1_info_wantc_c", "b2")).toEqual({ by: "a1", force: true });
    // The asker's own marker asks nothing of it.
    expect(await readWant(driver, "q.p0_info_wantc_c", "a1")).toBeUndefined();
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode(`v-queue want ${Date.now()} a1\n`), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toEqual({ by: "a1" });
    // Stale or damaged: no request.
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode(`v-queue want ${Date.now() - 60_000} a1\nidle\n`), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toBeUndefined();
    await writeWhole(driver, "q.p0_info_wantc_c", new TextEncoder().encode("garbage"), false);
    expect(await readWant(driver, "q.p0_info_wantc_c", "b2")).toBeUndefined();
  });

  it("wake a holder on the fs driver when one of its markers is written, not on every other change beside them", async () => {
    const dir = tempDir();
    const inner = fsDriver({ dir });
    let markerReads = 0;
    const driver = { ...inner, readRecord: (path: string) => ((markerReads += path.includes("_info_want") ? 1 : 0), inner.readRecord(path)) };
    const writer = await PartitionedWriter.open("busy", { driver, partitions: 2, durability: "none", onProblem: () => {} });
    try {
      for (const index of [0, 1])
        await writer.produce(["x"], { partitionKey: Array.from({ length: 50 }, (_, i) => `k${i}`).find((key) => partitionOfKey(key, 2) === index)! });
      expect(writer.held()).toHaveLength(2);
      // The base directory changes all the time on a busy storage (commits, info lines, other
      // queues' markers): each change used to read every held marker again.
      await sleep(150);
      markerReads = 0;
      const started = Date.now();
      for (let i = 0; i < 40; i++) {
        await writeWhole(inner, `other${i % 4}_info_wantc_c`, new TextEncoder().encode(`noise ${i}`), false);
        await sleep(10);
      }
      // The poll alone (every 500 ms, a read per held partition) ran meanwhile, more often on a
      // slow machine; a read per change would be 80.
      const polls = Math.floor((Date.now() - started) / 500) + 2;
      expect(markerReads).toBeLessThanOrEqual(2 * polls);
      // Another instance asks for partition 0's writer: the holder lets go of it.
      await writeWant(inner, writerWantPath(partitionName("busy", 0)), "other1");
      for (const deadline = Date.now() + 15_000; writer.held().includes(0) && Date.now() < deadline;) await sleep(10);
      expect(writer.held()).toEqual([1]);
    } finally {
      await writer.close();
    }
  });
});

describe("members", () => {
  it("counts the instances that polled lately, itself included; one that leaves or stops is no longer counted", async () => {
    const driver = memoryDriver({ name: "members" });
    const path = "q.p0_info_wantm_c";
    const at = (id: string) => new Members(driver, path, id);
    const [a, b, c] = ["a1", "b2", "c3"].map(at) as [Members, Members, Members];
    expect(await a.refresh()).toBe(1);
    expect(await b.refresh()).toBe(2);
    expect(await c.refresh()).toBe(3);
    expect(c.share(8)).toEqual({ floor: 2, ceil: 3 });
    // An asker counts before its line is read.
    await a.refresh();
    a.saw("d4");
    expect(a.count).toBe(4);
    await b.leave();
    expect(await at("e5").refresh()).toBe(3);
    // A line older than four beats is of an instance that stopped polling (or died).
    const text = new TextDecoder().decode(await driver.readRecord(path));
    await writeWhole(driver, path, new TextEncoder().encode(text.replace(/^a1 \d+$/m, `a1 ${Date.now() - 10_000}`)), false);
    expect(await at("f6").refresh()).toBe(3);
    // A line dropped by another instance's write (two rewrites at once) is written again at the next refresh, not a beat later.
    const late = at("h8");
    await late.refresh();
    const kept = new TextDecoder().decode(await driver.readRecord(path));
    await writeWhole(driver, path, new TextEncoder().encode(kept.replace(/^h8 \d+\n/m, "")), false);
    expect(new TextDecoder().decode(await driver.readRecord(path))).not.toMatch(/^h8 /m);
    await late.refresh();
    expect(new TextDecoder().decode(await driver.readRecord(path))).toMatch(/^h8 \d+$/m);
    // A damaged record counts nobody else.
    await writeWhole(driver, path, new TextEncoder().encode("not a members record"), false);
    expect(await at("g7").refresh()).toBe(1);
  });
});
