import { cp, open, readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { beforeAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueProblem } from "../../src/core/errors";
import type { Message, MessagePosition } from "../../src/format/message";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const COUNT = 300;
let source = "";
let positions: MessagePosition[] = [];
const tempDir = useTempDirs("vq-corrupt-");
const body = (i: number) => `message ${i} ${"#".repeat(i % 50)}`;
const recordEnd = (i: number) => positions[i]!.offset + 25 + Buffer.byteLength(body(i));

beforeAll(async () => {
  source = tempDir();
  const writer = await QueueWriter.open("q", { driver: fsDriver({ dir: source }), durability: "none" });
  positions = await writer.pushBatch(Array.from({ length: COUNT }, (_, i) => body(i)));
  await writer.close();
});

async function copyQueue(): Promise<string> {
  const dir = tempDir();
  await cp(source, dir, { recursive: true });
  return dir;
}

async function readAll(dir: string, problems: QueueProblem[]): Promise<Message[]> {
  const consumer = await QueueConsumer.open("q", "reader", { driver: fsDriver({ dir }), onProblem: (p) => problems.push(p) });
  const all: Message[] = [];
  for (let batch = await consumer.read({ max: 1000 }); batch.length > 0; batch = await consumer.read({ max: 1000 })) all.push(...batch);
  await consumer.close();
  return all;
}

describe("damaged files", () => {
  it("random flipped bytes: damaged records are reported and skipped, every intact record is delivered", async () => {
    for (let trial = 0; trial < 25; trial++) {
      const dir = await copyQueue();
      const file = await open(join(dir, "q-0", "q_queue"), "r+");
      const damaged = new Set<number>();
      for (let flips = 1 + (trial % 4); flips > 0; flips--) {
        const at = Math.floor(Math.random() * recordEnd(COUNT - 1));
        const byte = Buffer.alloc(1);
        await file.read(byte, 0, 1, at);
        byte[0] = byte[0]! ^ (1 + Math.floor(Math.random() * 255));
        await file.write(byte, 0, 1, at);
        damaged.add(positions.findIndex((p, i) => at >= p.offset && at < recordEnd(i)));
      }
      await file.close();
      const problems: QueueProblem[] = [];
      const delivered = (await readAll(dir, problems)).map((m) => m.data);
      const expected = Array.from({ length: COUNT }, (_, i) => i)
        .filter((i) => !damaged.has(i))
        .map(body);
      expect(delivered, `trial ${trial}, damaged records ${[...damaged]}`).toEqual(expected);
      expect(problems.length).toBeGreaterThan(0);
      expect(problems.every((p) => p.code === "BAD_RECORD" && p.part === 0)).toBe(true);
    }
  });

  it("a part cut short: the torn last record is never delivered, and the writer cuts it off on open", async () => {
    const dir = await copyQueue();
    await truncate(join(dir, "q-0", "q_queue"), recordEnd(COUNT - 1) - 3);
    const problems: QueueProblem[] = [];
    // The info line still claims the full size: the reader must not hand out the torn record.
    const delivered = await readAll(dir, problems);
    expect(delivered.length).toBe(COUNT - 1);
    expect(problems.map((p) => p.code)).toContain("BAD_RECORD");
    const writerProblems: QueueProblem[] = [];
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), onProblem: (p) => writerProblems.push(p) });
    expect(writerProblems.map((p) => p.code)).toEqual(["BAD_INFO", "TORN_TAIL"]);
    await writer.push("after repair");
    await writer.close();
    const again = await readAll(dir, []);
    expect(again.map((m) => m.data)).toEqual([...Array.from({ length: COUNT - 1 }, (_, i) => body(i)), "after repair"]);
  });

  it("a record cut out of the middle: the records after it are still delivered", async () => {
    const dir = await copyQueue();
    const path = join(dir, "q-0", "q_queue");
    const bytes = await readFile(path);
    const cut = Buffer.concat([bytes.subarray(0, positions[100]!.offset + 10), bytes.subarray(recordEnd(100))]);
    await writeFile(path, cut);
    const problems: QueueProblem[] = [];
    // The stored offsets after the cut no longer match their place: those records are lost too,
    // but nothing damaged is delivered and reading goes on to the end.
    const delivered = await readAll(dir, problems);
    expect(delivered.slice(0, 100).map((m) => m.data)).toEqual(Array.from({ length: 100 }, (_, i) => body(i)));
    expect(delivered.every((m) => m.data === body(Number((m.data as string).split(" ")[1])))).toBe(true);
    expect(problems.some((p) => p.code === "BAD_RECORD" && p.offset === positions[100]!.offset)).toBe(true);
  });

  it("truncated or garbled info files: the part is rescanned, nothing is lost", async () => {
    const dir = await copyQueue();
    await truncate(join(dir, "q-0", "q_info_push"), 5);
    await writeFile(join(dir, "q_info_queue"), "q;7;123\n");
    const problems: QueueProblem[] = [];
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), onProblem: (p) => problems.push(p) });
    expect(problems.map((p) => p.code)).toContain("BAD_INFO");
    expect(writer.position.part).toBe(1);
    await writer.push("next");
    await writer.close();
    const delivered = await readAll(dir, []);
    expect(delivered.length).toBe(COUNT + 1);
    expect(delivered.at(-1)!.data).toBe("next");
  });

  it("a garbled saved position: reported, and the consumer starts over rather than skipping", async () => {
    const dir = await copyQueue();
    await writeFile(join(dir, "q_info_pop_reader"), "q;reader;12x;;\n");
    const problems: QueueProblem[] = [];
    const delivered = await readAll(dir, problems);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(delivered.length).toBe(COUNT);
  });
});
