import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { inspectQueue, listQueues } from "../../src/inspect/queues";
import type { Message } from "../../src/format/message";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

/** Queue directories written by the Rust crate v_queue 0.2.7 (see its README.md). */
const FIXTURES = resolve(import.meta.dirname, "../fixtures/v_queue-0.2.7");
const tempDir = useTempDirs("vq-fixture-");

async function unpack(tar: string): Promise<string> {
  const dir = tempDir();
  execFileSync("tar", ["-xf", join(FIXTURES, tar), "-C", dir]);
  return join(dir, "q");
}

interface Expected {
  i: number;
  type: string;
  b64: string;
  part: number;
  pos: number;
  seq: number;
  crc: number;
}

async function expectedReads(name: string): Promise<Expected[]> {
  const text = await readFile(join(FIXTURES, `${name}.c1.jsonl`), "utf8");
  return text
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Expected);
}

async function drain(consumer: QueueConsumer): Promise<Message[]> {
  const all: Message[] = [];
  for (let batch = await consumer.read({ max: 4 }); batch.length > 0; batch = await consumer.read({ max: 4 })) all.push(...batch);
  return all;
}

const msgs = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `msg-${from + i}`);

describe("queues written by the crate v_queue 0.2.7", () => {
  it("has the crate's fixtures in the project (test/fixtures/v_queue-0.2.7)", () => {
    for (const name of ["basic", "basic-c1-first", "iflow"]) {
      expect(existsSync(join(FIXTURES, `${name}.tar`)), `${name}.tar`).toBe(true);
      expect(existsSync(join(FIXTURES, `${name}.c1.jsonl`)), `${name}.c1.jsonl`).toBe(true);
    }
  });

  for (const [tar, queue] of [
    ["basic.tar", "basic_q"],
    ["basic-c1-first.tar", "basic_q"],
    ["iflow.tar", "individuals-flow"],
  ] as const) {
    it(`${tar}: a new consumer reads all 15 messages in order, with the crate's positions and crcs`, async () => {
      const dir = await unpack(tar);
      const driver = fsDriver({ dir });
      expect(await listQueues(driver)).toEqual([queue]);
      const consumer = await QueueConsumer.open(queue, "fresh", { driver, start: "earliest" });
      const all = await drain(consumer);
      await consumer.close();
      expect(all.map((m) => m.data)).toEqual(msgs(0, 14));
      expect(all.every((m) => m.type === "string")).toBe(true);
      expect(all.map((m) => m.part)).toEqual([...Array(10).fill(0), ...Array(5).fill(1)]);
      expect(all.map((m) => m.seq)).toEqual([...msgs(0, 9).map((_, i) => i + 1), 1, 2, 3, 4, 5]);
      // What c1 read, as the crate logged it: same part, position, sequence and crc.
      for (const read of await expectedReads(tar.replace(".tar", ""))) {
        const message = all.find((m) => m.part === read.part && m.offset === read.pos)!;
        expect(message).toBeDefined();
        expect(message.seq).toBe(read.seq);
        expect(message.crc).toBe(read.crc);
        expect(message.data).toBe(Buffer.from(read.b64, "base64").toString("utf8"));
      }
    });
  }

  it("the first record of basic.tar has crc 0x12EF7511", async () => {
    const consumer = await QueueConsumer.open("basic_q", "x", { driver: fsDriver({ dir: await unpack("basic.tar") }) });
    const [first] = await consumer.read({ max: 1 });
    expect(first).toMatchObject({ data: "msg-0", crc: 0x12ef7511, offset: 0, seq: 1, size: 5 });
    await consumer.close();
  });

  it("basic-c1-first.tar: consumer c1 resumes at msg-3 and reads through msg-14", async () => {
    const driver = fsDriver({ dir: await unpack("basic-c1-first.tar") });
    const c1 = await QueueConsumer.open("basic_q", "c1", { driver });
    expect(c1.committed).toEqual({ part: 0, position: 90, count: 3 });
    expect((await drain(c1)).map((m) => m.data)).toEqual(msgs(3, 14));
    await c1.close();
  });

  it("basic.tar: c1 (created on part 1 by the crate) resumes at msg-13", async () => {
    const driver = fsDriver({ dir: await unpack("basic.tar") });
    const c1 = await QueueConsumer.open("basic_q", "c1", { driver });
    expect((await drain(c1)).map((m) => m.data)).toEqual(msgs(13, 14));
    await c1.close();
  });

  it("iflow.tar: c1 of individuals-flow resumes at msg-3", async () => {
    const driver = fsDriver({ dir: await unpack("iflow.tar") });
    const c1 = await QueueConsumer.open("individuals-flow", "c1", { driver });
    expect((await drain(c1)).map((m) => m.data)).toEqual(msgs(3, 14));
    await c1.close();
  });

  it("reports the crate's queue as the Rust server would: current part and its records, plus totals", async () => {
    const stats = await inspectQueue(fsDriver({ dir: await unpack("basic-c1-first.tar") }), "basic_q");
    expect(stats).toMatchObject({ currentPart: 1, currentCount: 5, messages: 15, bytes: 455 });
    expect(stats!.consumers).toEqual([{ name: "c1", kind: "ordered", part: 0, position: 90, count: 3, lag: 12 }]);
  });

  it("writes the same bytes as the crate for the same pushes: records, info lines and crcs", async () => {
    const crate = await unpack("basic-c1-first.tar");
    const dir = tempDir();
    const driver = fsDriver({ dir });
    let writer = await QueueWriter.open("basic_q", { driver });
    for (const m of msgs(0, 9)) await writer.push(m);
    // c1 reads and commits three, as in the fixture, before the reopen.
    const c1 = await QueueConsumer.open("basic_q", "c1", { driver });
    await c1.read({ max: 3 });
    await c1.commit();
    await c1.close();
    await writer.close();
    writer = await QueueWriter.open("basic_q", { driver });
    await writer.pushBatch(msgs(10, 14));
    await writer.close();
    for (const file of [
      "basic_q_info_queue",
      "basic_q-0/basic_q_queue",
      "basic_q-0/basic_q_info_push",
      "basic_q-1/basic_q_queue",
      "basic_q-1/basic_q_info_push",
      "basic_q_info_pop_c1",
    ]) {
      expect(await readFile(join(dir, file)), file).toEqual(await readFile(join(crate, file)));
    }
  });
});
