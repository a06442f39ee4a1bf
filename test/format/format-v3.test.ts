import { mkdir, readFile, writeFile } from "node:fs/promises";
import { crc32 } from "node:zlib";
import { join } from "pathe";
import { beforeAll, describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueProblem } from "../../src/core/errors";
import type { Message } from "../../src/format/message";
import { QueueWriter } from "../../src/writer/writer";
import { loadZstd, type Zstd, type ZstdLoader } from "../../src/compression/zstd";
import { ZSTD_IMPLS } from "../helpers/zstd";
import { useTempDirs } from "../helpers/tmp";

/**
 * Parts written by the crate 0.3.x (v3), built by hand from the rules of docs/format.md#v3-parts: the v2
 * header with the magic `33 FE EF EE`; type byte `S`/`O`, with 0x80 when the body is a u32
 * LE length and a zstd frame made with the part's dictionary; the same CRC-32 over the stored
 * bytes. Dictionaries: `fixtures/v3/dict.trained` was trained by `zstd --train --maxdict=4096`
 * on 500 lines of the bench corpus, and `message.json.zst` is `zstd -3 --no-check -D
 * dict.trained message.json`: frames of the real zstd, read by v-queue's.
 */

const tempDir = useTempDirs("vq-v3-");
const FIXTURES = join(import.meta.dirname, "../fixtures", "v3");
const V2_MAGIC = [0xee, 0xfe, 0xef, 0xee];
const V3_MAGIC = [0x33, 0xfe, 0xef, 0xee];
const COMPRESSED = 0x80;

let zstd: Zstd;
/** The consumers' zstd: each implementation in turn for the compressed parts. */
let readerZstd: ZstdLoader = loadZstd;
let trained: Buffer;
let message: Buffer;
let cliFrame: Buffer;
beforeAll(async () => {
  zstd = await loadZstd();
  trained = await readFile(join(FIXTURES, "dict.trained"));
  message = await readFile(join(FIXTURES, "message.json"));
  cliFrame = await readFile(join(FIXTURES, "message.json.zst"));
});

interface Rec {
  type: "S" | "O";
  body: Uint8Array;
  compressed?: boolean;
  magic?: number[];
}

function record(offset: number, seq: number, { type, body, compressed, magic = V3_MAGIC }: Rec): Buffer {
  const rec = Buffer.alloc(25 + body.length);
  rec.writeBigUInt64LE(BigInt(offset), 0);
  rec.writeUInt32LE(body.length, 8);
  rec.set(magic, 12);
  rec.writeUInt32LE(seq, 16);
  rec[20] = type.charCodeAt(0) | (compressed ? COMPRESSED : 0);
  rec.set(body, 25);
  rec.writeUInt32LE(crc32(rec), 21); // crc field still zero here
  return rec;
}

/** Records back to back, offsets and sequence numbers from the start of a part. */
function part(...records: Rec[]): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  records.forEach((r, i) => {
    out.push(record(at, i + 1, r));
    at += out.at(-1)!.length;
  });
  return Buffer.concat(out);
}

/** A compressed body: the u32 LE length, then the frame. */
function stored(length: number, frame: Uint8Array): Buffer {
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32LE(length);
  return Buffer.concat([prefix, frame]);
}

function compressed(text: string, dict: Uint8Array = trained): Rec {
  const bytes = Buffer.from(text);
  const c = zstd.compressor(dict, 3);
  const frame = c.compress(bytes).slice();
  c.free();
  return { type: "S", body: stored(bytes.length, frame), compressed: true };
}

const raw = (text: string): Rec => ({ type: "S", body: Buffer.from(text) });
const infoLine = (prefix: string) => `${prefix}${crc32(prefix)}\n`;
/** What a v3 push info line may look like: its syntax is unknown, and a 0.2.x reader must refuse it. */
const UNPARSEABLE_INFO = "q;v3;59;2;0\n";
const LINE_A = '{"level":"info","msg":"order placed by customer u_1234 with 3 items","service":"checkout"}';
const LINE_B = '{"level":"warn","msg":"retrying upstream call to payments (attempt 2)","service":"gateway"}';

interface Setup {
  dir: string;
  problems: QueueProblem[];
  onProblem: (problem: QueueProblem) => void;
}

/** Queue `q`: part 0 written by v-queue (v2: `v2-a`, `v2-b`), then part 1 as given, the current part. */
async function queueWithPart1(bytes: Buffer, pushInfo = infoLine(`q;${bytes.length};0;`), dict?: { path: string; bytes: Uint8Array }): Promise<Setup> {
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
  if (dict) await writeFile(join(dir, dict.path), dict.bytes);
  await writeFile(join(dir, "q_info_queue"), infoLine("q;1;"));
  return { dir, problems, onProblem };
}

async function drain(consumer: QueueConsumer): Promise<Message[]> {
  const all: Message[] = [];
  for (let batch = await consumer.read(); batch.length > 0; batch = await consumer.read()) all.push(...batch);
  return all;
}

async function readAll({ dir, onProblem }: Setup, name = "c"): Promise<{ data: unknown[]; position: QueueConsumer["position"] }> {
  const consumer = await QueueConsumer.open("q", name, { driver: fsDriver({ dir }), onProblem, zstd: readerZstd });
  const all = await drain(consumer);
  const position = consumer.position;
  await consumer.commit();
  await consumer.close();
  return { data: all.map((m) => (typeof m.data === "string" ? m.data : Buffer.from(m.data).toString("hex"))), position };
}

const codes = (problems: QueueProblem[]) => problems.map((p) => p.code);

describe("uncompressed v3 parts (crate 0.3.x)", () => {
  const bytes = () => part(raw("v3-one"), { type: "O", body: Uint8Array.of(1, 2, 3) });

  it("are read after v2 parts, each record by its own magic, and a commit past them holds", async () => {
    const setup = await queueWithPart1(bytes(), infoLine(`q;${bytes().length};2;`));
    const { data, position } = await readAll(setup);
    expect(data).toEqual(["v2-a", "v2-b", "v3-one", "010203"]);
    expect(setup.problems).toEqual([]);
    expect(position).toEqual({ part: 1, position: bytes().length, count: 2 });
    expect((await readAll(setup)).data).toEqual([]);
  });

  it("a v-queue writer leaves a v3 part as it is (records and info line) and starts a new part", async () => {
    const setup = await queueWithPart1(bytes(), UNPARSEABLE_INFO);
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir: setup.dir }), onProblem: setup.onProblem, rollOnOpen: false });
    expect(writer.position.part).toBe(2);
    await writer.push("after");
    await writer.close();
    expect(await readFile(join(setup.dir, "q-1", "q_queue"))).toEqual(bytes());
    expect(await readFile(join(setup.dir, "q-1", "q_info_push"), "utf8")).toBe(UNPARSEABLE_INFO);
    expect(setup.problems).toEqual([]);
    expect((await readAll(setup, "fresh")).data).toEqual(["v2-a", "v2-b", "v3-one", "010203", "after"]);
    // The part's line cannot be parsed: a missing hint, reported once; the part file says where it ends.
    expect(codes(setup.problems)).toEqual(["BAD_INFO"]);
  });

  it("an unparseable info line on the current part, its writer gone: the part is read to the end of its file, reported once", async () => {
    const setup = await queueWithPart1(bytes(), UNPARSEABLE_INFO);
    const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir: setup.dir }), onProblem: setup.onProblem });
    expect((await drain(consumer)).map((m) => m.seq)).toEqual([1, 2, 1, 2]);
    expect(await consumer.read()).toEqual([]);
    await consumer.close();
    expect(setup.problems).toEqual([expect.objectContaining({ code: "BAD_INFO", part: 1 })]);
  });

  it("a torn v3 tail: a consumer stops before it and says so; the writer leaves it and starts a new part", async () => {
    const whole = bytes();
    const torn = Buffer.concat([whole, record(whole.length, 3, raw("never-finished")).subarray(0, 30)]);
    const setup = await queueWithPart1(torn, infoLine(`q;${whole.length};2;`));
    expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", "v3-one", "010203"]);
    expect(setup.problems).toEqual([expect.objectContaining({ code: "TORN_TAIL", part: 1, offset: whole.length, bytes: 30 })]);
    setup.problems.length = 0;
    const writer = await QueueWriter.open("q", { driver: fsDriver({ dir: setup.dir }), onProblem: setup.onProblem });
    await writer.push("after");
    await writer.close();
    expect(await readFile(join(setup.dir, "q-1", "q_queue"))).toEqual(torn);
    expect(codes(setup.problems)).toEqual(["TORN_TAIL"]);
    setup.problems.length = 0;
    expect((await readAll(setup)).data).toEqual(["after"]);
    // Past the part's end now that a newer part exists: the torn bytes are stepped over, reported.
    expect(codes(setup.problems)).toEqual(["BAD_RECORD"]);
  });

  it("a v2 record never carries the compression flag: such a header is damage", async () => {
    const setup = await queueWithPart1(part({ ...raw("flagged"), magic: V2_MAGIC, compressed: true }, { ...raw("fine"), magic: V2_MAGIC }));
    expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", "fine"]);
    expect(codes(setup.problems)).toEqual(["BAD_RECORD"]);
  });
});

// Frames of the zstd CLI (fixtures) and of each implementation, read by that implementation.
for (const impl of ZSTD_IMPLS)
  describe.skipIf(impl.skip)(`compressed v3 parts, zstd ${impl.name}`, () => {
    beforeAll(async () => {
      zstd = await impl.zstd();
      readerZstd = impl.zstd;
    });
    const mixed = () =>
      part(raw("tiny"), { type: "S", body: stored(message.length, cliFrame), compressed: true }, compressed(LINE_A), raw(LINE_B), compressed(LINE_B));

    it.each(["q-1/q_dict", "q_dict-1", "q_dict_1"])("are read with a trained dictionary at %s (a frame of the zstd CLI among them)", async (path) => {
      const setup = await queueWithPart1(mixed(), undefined, { path, bytes: trained });
      const { data, position } = await readAll(setup);
      expect(data).toEqual(["v2-a", "v2-b", "tiny", message.toString(), LINE_A, LINE_B, LINE_B]);
      expect(setup.problems).toEqual([]);
      expect(position).toEqual({ part: 1, position: mixed().length, count: 5 });
    });

    it("hand out the body's size, and a cursor past the stored bytes", async () => {
      const setup = await queueWithPart1(part(compressed(LINE_A), raw("next")), undefined, { path: "q-1/q_dict", bytes: trained });
      const consumer = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir: setup.dir }), start: "latest", zstd: readerZstd });
      await consumer.seek({ part: 1, seq: 1 });
      const [first] = await consumer.read({ max: 1 });
      expect(first).toMatchObject({ data: LINE_A, size: LINE_A.length, seq: 1 });
      await consumer.commit(first);
      await consumer.close();
      const again = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir: setup.dir }), zstd: readerZstd });
      expect((await drain(again)).map((m) => m.data)).toEqual(["next"]);
      await again.close();
    });

    it("are read with a raw-content dictionary", async () => {
      const dict = Buffer.from(`${LINE_A}\n${LINE_B}\n`.repeat(4));
      const setup = await queueWithPart1(part(compressed(LINE_A, dict), compressed(LINE_B, dict)), undefined, { path: "q-1/q_dict", bytes: dict });
      expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", LINE_A, LINE_B]);
      expect(setup.problems).toEqual([]);
    });

    it("with no dictionary anywhere: compressed records are reported and skipped, never guessed; raw ones are read", async () => {
      const setup = await queueWithPart1(mixed());
      const { data, position } = await readAll(setup);
      expect(data).toEqual(["v2-a", "v2-b", "tiny", LINE_B]);
      expect(codes(setup.problems)).toEqual(["NO_DICTIONARY", "NO_DICTIONARY", "NO_DICTIONARY"]);
      expect(position).toEqual({ part: 1, position: mixed().length, count: 5 });
    });

    it("a corrupt frame (its crc right) and a wrong announced length are reported and skipped", async () => {
      const good = compressed(LINE_A);
      const corrupt = Buffer.from(good.body);
      corrupt.fill(0x55, 12, 30); // inside the frame, after its header
      const wrongLength = Buffer.from(good.body);
      wrongLength.writeUInt32LE(LINE_A.length + 1);
      const bytes = part({ ...good, body: corrupt }, { ...good, body: wrongLength }, good);
      const setup = await queueWithPart1(bytes, undefined, { path: "q-1/q_dict", bytes: trained });
      expect((await readAll(setup)).data).toEqual(["v2-a", "v2-b", LINE_A]);
      expect(setup.problems).toEqual([
        expect.objectContaining({ code: "BAD_COMPRESSED", part: 1, offset: 0 }),
        expect.objectContaining({ code: "BAD_COMPRESSED", part: 1, offset: 25 + corrupt.length }),
      ]);
    });
  });
