import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { LogFile } from "../../src/core/driver";
import { HEADER_SIZE, TYPE_STRING, writeRecord } from "../../src/format/record";
import { scanPart, type ChunkCache } from "../../src/log/scan";

const text = new TextEncoder();

/** A part file of records with these bodies, on the memory driver. */
async function part(bodies: string[]): Promise<{ file: LogFile; bytes: Uint8Array; ends: number[] }> {
  const size = bodies.reduce((sum, b) => sum + HEADER_SIZE + text.encode(b).length, 0);
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  const ends: number[] = [];
  let at = 0;
  bodies.forEach((body, i) => {
    const data = text.encode(body);
    bytes.set(data, at + HEADER_SIZE);
    writeRecord(bytes, view, at, at, data.length, i + 1, TYPE_STRING);
    at += HEADER_SIZE + data.length;
    ends.push(at);
  });
  const file = (await memoryDriver().openLog("p", { create: true }))!;
  await file.append(0, bytes);
  return { file, bytes, ends };
}

async function scan(file: LogFile, from: number, limit: number, chunkSize = 64, cache?: ChunkCache) {
  const seen: number[] = [];
  const skips: [number, number][] = [];
  const result = await scanPart(file, { from, limit, chunkSize, cache, onSkip: (o, b) => skips.push([o, b]) }, (_b, _v, _a, h) => (seen.push(h.seq), true));
  return { seen, skips, result };
}

describe("scanPart", () => {
  it("visits every record up to the limit, across chunk boundaries and records larger than a chunk", async () => {
    const { file, bytes } = await part(["a", "b".repeat(200), "c", "d".repeat(70)]);
    const { seen, skips, result } = await scan(file, 0, bytes.length, 32);
    expect(seen).toEqual([1, 2, 3, 4]);
    expect(skips).toEqual([]);
    expect(result).toEqual({ next: bytes.length, stopped: false });
  });

  it("stops where the visitor says, and resumes from there", async () => {
    const { file, bytes, ends } = await part(["a", "b", "c"]);
    const first = await scanPart(file, { from: 0, limit: bytes.length, chunkSize: 64, onSkip: () => {} }, () => false);
    expect(first).toEqual({ next: ends[0], stopped: true });
    expect((await scan(file, ends[0]!, bytes.length)).seen).toEqual([2, 3]);
  });

  it("never visits past the limit: a record that ends after it is left for later", async () => {
    const { file, ends } = await part(["a", "b", "c"]);
    const { seen, result } = await scan(file, 0, ends[1]! + 5);
    expect(seen).toEqual([1, 2]);
    expect(result.next).toBe(ends[1]! + 5); // reported as the few bytes it could not use
  });

  it("steps over a damaged record (bad crc) to the next valid one, reporting the region once", async () => {
    const { file, bytes, ends } = await part(["a", "bb", "c"]);
    bytes[ends[0]! + HEADER_SIZE]! ^= 0xff; // a body byte of record 2
    await file.truncate(0);
    await file.append(0, bytes);
    const { seen, skips } = await scan(file, 0, bytes.length);
    expect(seen).toEqual([1, 3]);
    expect(skips).toEqual([[ends[0], ends[1]! - ends[0]!]]);
  });

  it("serves a later scan from the cached chunk without reading the file", async () => {
    const { file, bytes } = await part(["a", "b", "c"]);
    const cache: ChunkCache = { buf: undefined, pos: 0 };
    await scan(file, 0, bytes.length, 1024, cache);
    let reads = 0;
    const counting: LogFile = { ...file, read: (p, l) => (reads++, file.read(p, l)) };
    expect((await scan(counting, 0, bytes.length, 1024, cache)).seen).toEqual([1, 2, 3]);
    expect(reads).toBe(0);
  });
});
