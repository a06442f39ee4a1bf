import { appendFile, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { positionAfter } from "../../src/format/position";
import type { QueueProblem } from "../../src/core/errors";
import { sharedJournalPath, sharedStatePath } from "../../src/storage/paths";
import { line } from "../../src/consumers/state/shared-state";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { inspectQueue } from "../../src/inspect/queues";
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
    // Closed at the floor: the snapshot is its header and birth lines only, and the journal is gone.
    expect(
      (await readFile(join(dir, sharedStatePath("q", "s")), "utf8"))
        .split("\n")
        .filter(Boolean)
        .map((l) => l[0]),
    ).toEqual(["H", "B"]);
    expect(await stat(join(dir, sharedJournalPath("q", "s"))).catch(() => undefined)).toBeUndefined();
  });

  it("skip a torn journal line (reported), keep every whole one", async () => {
    const { dir, driver } = await filled(3);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    const [m0, m1, m2] = await c.poll({ max: 3 });
    await c.ack(m1!);
    await c.close();
    // The snapshot: the header, the high-water mark after m2 (m0 and m2 handed out once), m1's ack,
    // the birth: its leases are above that id.
    const lines = (await readFile(join(dir, sharedStatePath("q", "s")), "utf8")).split("\n").filter(Boolean);
    const after = positionAfter(m2!);
    const born = lines.at(-1)!.split(";");
    expect(lines.slice(0, -1).map((l) => l.split(";").slice(0, -1).join(";"))).toEqual([
      "H;v-queue-shared;1",
      `W;0;${after.position};${after.count}`,
      `A;0;${m1!.offset}`,
    ]);
    expect(born[0]).toBe("B");
    expect(Number(born[1])).toBeLessThan(m0!.lease);
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

describe("a shared consumer's state lines: the mark (W), ack ranges (R), and the lines of earlier versions", () => {
  const body = (lines: string[]) => lines.map((fields) => line(fields)).join("");
  const kinds = async (dir: string) =>
    (await readFile(join(dir, sharedStatePath("q", "s")), "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((l) => l.split(";")[0]);

  it("count first hand-outs by one mark, acks of neighbours by one range; both load again, replayed twice", async () => {
    const { dir, driver } = await filled(6);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    const got = await c.poll({ max: 6 });
    expect(await c.ackAll([got[1]!, got[2]!, got[3]!])).toEqual([undefined, undefined, undefined]);
    const journal = await readFile(join(dir, sharedJournalPath("q", "s")), "utf8");
    // One W line for the 6 hand-outs, one R line for the 3 acks: no line per message.
    expect(
      journal
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split(";").slice(0, -1).join(";")),
    ).toEqual([`W;0;${positionAfter(got[5]!).position};6`, `R;0;${got[1]!.offset};${got[3]!.offset};3`]);
    await c.close();
    expect(await kinds(dir)).toEqual(["H", "W", "R", "B"]);
    // The snapshot's lines again in the journal (a crash between snapshot and emptied journal): the same state.
    const snapshot = await readFile(join(dir, sharedStatePath("q", "s")), "utf8");
    await appendFile(join(dir, sharedJournalPath("q", "s")), snapshot.split("\n").slice(1).join("\n"));
    const again = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2 });
    const back = await again.poll({ max: 10 });
    expect(back.map((m) => [m.data, m.deliveries])).toEqual([
      ["m0", 2],
      ["m4", 2],
      ["m5", 2],
    ]);
    await again.close();
    // Their second hand-out has lines of its own: at the third open they are due a third, past maxDeliveries 2.
    const third = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2 });
    expect(await third.poll({ max: 10, timeoutMs: 0 })).toEqual([]);
    expect(third.stats.deadLetteredTotal).toBe(3);
    await third.close();
  });

  it("pass a group's waiting message with a count of 0: one mark counts the others, and after a restart the waiting one was never handed out", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    for (const [body, group] of [
      ["a1", "a"],
      ["a2", "a"],
      ["b1", "b"],
      ["c1", "c"],
    ] as const)
      await q.produce([body], { group });
    await q.close();
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    const got = await c.poll({ max: 10 });
    expect(got.map((m) => m.data)).toEqual(["a1", "b1", "c1"]);
    const a2 = { part: got[0]!.part, offset: positionAfter(got[0]!).position };
    const journal = (await readFile(join(dir, sharedJournalPath("q", "s")), "utf8")).split("\n").filter(Boolean);
    // a2's count of 0 before the mark past c1: no line per message handed out.
    expect(journal.map((l) => l.split(";").slice(0, -1).join(";"))).toEqual([`D;0;${a2.offset};0`, `W;0;${positionAfter(got[2]!).position};4`]);
    await c.close();
    // The snapshot keeps the 0 below the mark; an inspection counts three handed out, not four.
    expect(await kinds(dir)).toEqual(["H", "W", "D", "B"]);
    const stats = (await inspectQueue(driver, "q"))!;
    expect(stats.consumers[0]!.shared).toMatchObject({ pending: 3, maxDeliveries: 1 });
    // maxDeliveries 2: the three come a second time; a2, after a1's ack, a first time (not dead-lettered).
    const again = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 2 });
    const back = await again.poll({ max: 10 });
    expect(back.map((m) => [m.data, m.deliveries])).toEqual([
      ["a1", 2],
      ["b1", 2],
      ["c1", 2],
    ]);
    await again.ackAll(back);
    expect((await again.poll({ max: 10 })).map((m) => [m.data, m.deliveries])).toEqual([["a2", 1]]);
    expect(again.stats.deadLetteredTotal).toBe(0);
    await again.close();
  });

  it("take an ack sent again after a restart (its answer lost), and a late one of a message handed out before, not read again yet", async () => {
    const { driver } = await filled(6);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    const got = await c.poll({ max: 5 });
    await c.ackAll([got[1]!, got[2]!]); // an R line
    await c.ack(got[4]!); // an A line
    await c.close();
    const again = await SharedConsumer.open("q", "s", { driver, syncCommits: false });
    expect(await again.ackAll([got[1]!, got[2]!, got[4]!])).toEqual([undefined, undefined, undefined]);
    await again.ack(got[2]!);
    // Handed out before the restart, not acknowledged: its worker's late ack is taken (the work is done).
    await again.ack(got[3]!);
    // Never handed out: refused.
    const m5 = { part: got[4]!.part, offset: got[4]!.offset + (got[4]!.offset - got[3]!.offset), lease: got[4]!.lease };
    await expect(again.ack(m5)).rejects.toMatchObject({ code: "E_LEASE" });
    expect((await again.poll({ max: 10 })).map((m) => m.data)).toEqual(["m0", "m5"]);
    await again.close();
  });

  it("skip a torn mark or range line: no message is taken as handed out or acknowledged by it", async () => {
    const { dir, driver } = await filled(4);
    await (await SharedConsumer.open("q", "s", { driver, syncCommits: false })).close();
    const whole = body(["A;0;0;"]);
    await appendFile(join(dir, sharedJournalPath("q", "s")), `${whole}R;0;0;999;4;1234\nW;0;999;4;`);
    const problems: QueueProblem[] = [];
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, onProblem: (p) => problems.push(p) });
    expect(problems.map((p) => p.message)).toEqual([expect.stringContaining("skipped 2 damaged line(s)")]);
    const got = await c.poll({ max: 10 });
    expect(got.map((m) => [m.data, m.deliveries])).toEqual([
      ["m1", 1],
      ["m2", 1],
      ["m3", 1],
    ]);
    await c.close();
  });

  it("load the files of earlier versions (a D line per hand-out, an A line per ack), and hand-written ranges", async () => {
    const { dir, driver } = await filled(6);
    await (await SharedConsumer.open("q", "s", { driver, syncCommits: false })).close();
    const offsets = (await (async () => {
      const peek = await SharedConsumer.open("q", "peek", { driver, syncCommits: false });
      const all = await peek.poll({ max: 6 });
      await peek.close();
      return all.map((m) => m.offset);
    })()) as number[];
    await writeFile(join(dir, sharedStatePath("q", "s")), body(["H;v-queue-shared;1;", "D;0;0;1;", `A;0;${offsets[1]};`, `D;0;${offsets[2]};3;`]));
    await writeFile(join(dir, sharedJournalPath("q", "s")), body([`R;0;${offsets[3]};${offsets[4]};2;`, `D;0;${offsets[5]};1;`]));
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, maxDeliveries: 10 });
    const got = await c.poll({ max: 10 });
    expect(got.map((m) => [m.data, m.deliveries])).toEqual([
      ["m0", 2],
      ["m2", 4],
      ["m5", 2],
    ]);
    await c.close();
  });
});
