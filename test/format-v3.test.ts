import { mkdir, readFile, writeFile } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../adapters/drivers/fs";
import { QueueConsumer } from "../src/consumer";
import type { QueueProblem } from "../src/errors";
import type { Message } from "../src/message";
import { QueueWriter } from "../src/writer";
import { useTempDirs } from "./helpers/tmp";

/**
 * Parts written by the crate 0.3.x (v3 records) are not supported yet. These tests pin what
 * happens today, as the README says ("On-disk format"): v3 records are never handed out, and
 * what is reported depends on whether the part's push info line can be parsed.
 *
 * The v3 part is built by hand from the format's known rules: the v2 header with the magic
 * `33 FE EF EE`, type byte `S`/`O` with the compression flag (0x80) clear, a raw body, and the
 * same CRC-32 (header with the crc zeroed, then the body).
 */

const tempDir = useTempDirs("vq-v3-");
const V2_MAGIC = [0xee, 0xfe, 0xef, 0xee];
const V3_MAGIC = [0x33, 0xfe, 0xef, 0xee];

function record(magic: number[], offset: number, seq: number, type: "S" | "O", body: Uint8Array): Buffer {
  const rec = Buffer.alloc(25 + body.length);
  rec.writeBigUInt64LE(BigInt(offset), 0);
  rec.writeUInt32LE(body.length, 8);
  rec.set(magic, 12);
  rec.writeUInt32LE(seq, 16);
  rec[20] = type.charCodeAt(0);
  rec.set(body, 25);
  rec.writeUInt32LE(crc32(rec), 21); // crc field still zero here
  return rec;
}

/** A part of two uncompressed records, `v3-one` (text) and bytes 1 2 3, in the given format. */
function part(magic: number[]): Buffer {
  const first = record(magic, 0, 1, "S", Buffer.from("v3-one"));
  return Buffer.concat([first, record(magic, first.length, 2, "O", Uint8Array.of(1, 2, 3))]);
}

const infoLine = (prefix: string) => `${prefix}${crc32(prefix)}\n`;
/** What a v3 push info line may look like: its syntax is unknown, and a 0.2.x reader must refuse it. */
const UNPARSEABLE_INFO = "q;v3;59;2;0\n";

interface Setup {
  dir: string;
  problems: QueueProblem[];
  onProblem: (problem: QueueProblem) => void;
}

/** Queue `q`: part 0 written by v-queue (v2: `v2-a`, `v2-b`), then part 1 as given, the current part. */
async function queueWithPart1(bytes: Buffer, pushInfo: string): Promise<Setup> {
  const dir = await tempDir();
  const problems: QueueProblem[] = [];
  const onProblem = (problem: QueueProblem) => void problems.push(problem);
  const writer = await QueueWriter.open("q", { driver: fsDriver({ dir }), onProblem });
  await writer.pushBatch(["v2-a", "v2-b"]);
  await writer.close();
  // As a writer of the crate 0.3.x reopening the queue: a new part, in its new format.
  await mkdir(join(dir, "q-1"));
  await writeFile(join(dir, "q-1", "q_queue"), bytes);
  await writeFile(join(dir, "q-1", "q_info_push"), pushInfo);
  await writeFile(join(dir, "q_info_queue"), infoLine("q;1;"));
  return { dir, problems, onProblem };
}

async function drain(consumer: QueueConsumer): Promise<Message[]> {
  const all: Message[] = [];
  for (let batch = await consumer.read(); batch.length > 0; batch = await consumer.read()) all.push(...batch);
  return all;
}

async function readAll({ dir, onProblem }: Setup, name = "c"): Promise<{ data: unknown[]; position: QueueConsumer["position"] }> {
  const consumer = await QueueConsumer.open("q", name, { driver: fsDriver({ dir }), onProblem });
  const all = await drain(consumer);
  const position = consumer.position;
  await consumer.commit();
  await consumer.close();
  return { data: all.map((m) => m.data), position };
}

describe("parts written by the crate 0.3.x (v3), not supported yet", () => {
  it("the hand-built part is right but for the magic: with the v2 magic, v-queue reads it", async () => {
    const bytes = part(V2_MAGIC);
    const setup = await queueWithPart1(bytes, infoLine(`q;${bytes.length};2;`));
    expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", "v3-one", Uint8Array.of(1, 2, 3)]);
    expect(setup.problems).toEqual([]);
    expect(part(V3_MAGIC).length).toBe(bytes.length);
    expect(part(V3_MAGIC).subarray(12, 16)).toEqual(Buffer.from(V3_MAGIC));
  });

  it("v3 records after a v2-form push info line: not handed out, reported as BAD_RECORD, stepped over", async () => {
    const bytes = part(V3_MAGIC);
    const setup = await queueWithPart1(bytes, infoLine(`q;${bytes.length};2;`));
    const { data, position } = await readAll(setup);
    expect(data).toEqual(["v2-a", "v2-b"]);
    expect(setup.problems).toEqual([expect.objectContaining({ code: "BAD_RECORD", queue: "q", part: 1, offset: 0, bytes: bytes.length })]);
    // The consumer moved past the whole part, and its commit saved that: they are not read again.
    expect(position).toEqual({ part: 1, position: bytes.length, count: 0 });
    expect((await readFile(join(setup.dir, "q_info_pop_c"), "utf8")).split("\n")[0]).toBe(`q;c;${bytes.length};0;1`);

    // A v-queue writer opening the queue leaves the v3 part as it is and starts part 2.
    setup.problems.length = 0;
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir: setup.dir }), onProblem: setup.onProblem });
    await writer.push("after");
    await writer.close();
    expect(await readFile(join(setup.dir, "q-1", "q_queue"))).toEqual(bytes);
    expect(setup.problems).toEqual([]);
    expect((await readAll(setup, "fresh")).data).toEqual(["v2-a", "v2-b", "after"]);
    expect(setup.problems).toEqual([expect.objectContaining({ code: "BAD_RECORD", part: 1, offset: 0, bytes: bytes.length })]);
  });

  it("a v3 part with a push info line v-queue cannot parse, followed by a newer part: reported as BAD_RECORD, skipped", async () => {
    const bytes = part(V3_MAGIC);
    const setup = await queueWithPart1(bytes, UNPARSEABLE_INFO);
    await mkdir(join(setup.dir, "q-2"));
    const v2 = record(V2_MAGIC, 0, 1, "S", Buffer.from("v2-c"));
    await writeFile(join(setup.dir, "q-2", "q_queue"), v2);
    await writeFile(join(setup.dir, "q-2", "q_info_push"), infoLine(`q;${v2.length};1;`));
    await writeFile(join(setup.dir, "q_info_queue"), infoLine("q;2;"));
    expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", "v2-c"]);
    expect(setup.problems).toEqual([expect.objectContaining({ code: "BAD_RECORD", part: 1, offset: 0, bytes: bytes.length })]);
  });

  it("the current part is v3 with a push info line v-queue cannot parse: a consumer stops there and says why, once", async () => {
    const bytes = part(V3_MAGIC);
    const setup = await queueWithPart1(bytes, UNPARSEABLE_INFO);
    const { data, position } = await readAll(setup);
    expect(data).toEqual(["v2-a", "v2-b"]);
    expect(position).toEqual({ part: 1, position: 0, count: 0 });
    expect(setup.problems).toEqual([expect.objectContaining({ code: "UNSUPPORTED_PART", part: 1, offset: 0, bytes: bytes.length })]);
  });

  it("the current part is v3 with a push info line v-queue cannot parse: a v-queue writer leaves it untouched and starts a new part", async () => {
    const bytes = part(V3_MAGIC);
    const setup = await queueWithPart1(bytes, UNPARSEABLE_INFO);
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir: setup.dir }), onProblem: setup.onProblem });
    await writer.push("after");
    await writer.close();
    expect(setup.problems).toEqual([expect.objectContaining({ code: "UNSUPPORTED_PART", part: 1, offset: 0 })]);
    expect(await readFile(join(setup.dir, "q-1", "q_queue"))).toEqual(bytes);
    expect(await readFile(join(setup.dir, "q-1", "q_info_push"), "utf8")).toBe(UNPARSEABLE_INFO);
    setup.problems.length = 0;
    expect((await readAll(setup, "fresh")).data).toEqual(["v2-a", "v2-b", "after"]);
    expect(setup.problems).toEqual([expect.objectContaining({ code: "BAD_RECORD", part: 1, offset: 0, bytes: bytes.length })]);
  });
});
