import { crc32Range } from "./crc32";

/**
 * One record of a part file (docs/format.md#records): a 25-byte little-endian header, then the body.
 *
 * | 0..8 offset u64 | 8..12 length u32 | 12..16 magic EE FE EF EE | 16..20 seq u32 | 20 type | 21..25 crc u32 |
 */
export const HEADER_SIZE = 25;
export const MAGIC = 0xeeeffeee; // bytes EE FE EF EE read as a little-endian u32
/** The crate 0.3.x's v3 records (docs/format.md#v3-parts): the same header, this magic, maybe a compressed body. */
export const MAGIC_V3 = 0xeeeffe33; // bytes 33 FE EF EE
export const TYPE_STRING = 0x53; // "S"
export const TYPE_OBJECT = 0x4f; // "O"
/** Type-byte flag of a v3 record whose body is compressed (compression/part-codec.ts); v2 never sets it. */
export const TYPE_COMPRESSED = 0x80;
/** The crate refuses bodies of 2^31 bytes or more. */
export const MAX_BODY_SIZE = 0x7fffffff;

export type RecordType = "string" | "object";

export interface RecordHeader {
  offset: number;
  length: number;
  seq: number;
  type: RecordType;
  crc: number;
  /** A v3 record (magic `33 FE EF EE`): each record says its own format. */
  v3: boolean;
  /** Its body is a u32 length and a zstd frame (v3 only; compression/part-codec.ts). */
  compressed: boolean;
}

/**
 * Writes a header at `at` in `buf` for a body already placed right after it, and
 * computes the record's crc (header with the crc field zeroed, then the body).
 */
export function writeRecord(buf: Uint8Array, view: DataView, at: number, offset: number, length: number, seq: number, typeByte: number, magic = MAGIC): number {
  // u64 offset as two u32 halves: offsets stay below 2^53.
  view.setUint32(at, offset >>> 0, true);
  view.setUint32(at + 4, Math.floor(offset / 0x1_0000_0000), true);
  view.setUint32(at + 8, length, true);
  view.setUint32(at + 12, magic, true);
  view.setUint32(at + 16, seq, true);
  buf[at + 20] = typeByte;
  view.setUint32(at + 21, 0, true);
  // Header and body are contiguous: one pass gives crc(header with crc zeroed, then body).
  const crc = crc32Range(buf, at, at + HEADER_SIZE + length);
  view.setUint32(at + 21, crc, true);
  return crc;
}

/**
 * Parses the header at `at` of `buf`, which holds the part bytes from file offset
 * `bufOffset`. Returns undefined when the bytes there cannot be a header.
 */
export function readHeader(buf: Uint8Array, view: DataView, at: number, bufOffset: number): RecordHeader | undefined {
  const magic = view.getUint32(at + 12, true);
  const v3 = magic === MAGIC_V3;
  if (magic !== MAGIC && !v3) return undefined;
  const typeByte = buf[at + 20]!;
  // Only v3 may set the compression flag: a v2 header with it is damage.
  const type = v3 ? typeByte & ~TYPE_COMPRESSED : typeByte;
  if (type !== TYPE_STRING && type !== TYPE_OBJECT) return undefined;
  const offset = view.getUint32(at, true) + view.getUint32(at + 4, true) * 0x1_0000_0000;
  // The header names its own position: a cheap, strong check when resynchronising.
  if (offset !== bufOffset + at) return undefined;
  const length = view.getUint32(at + 8, true);
  if (length > MAX_BODY_SIZE) return undefined;
  return {
    offset,
    length,
    seq: view.getUint32(at + 16, true),
    type: type === TYPE_STRING ? "string" : "object",
    crc: view.getUint32(at + 21, true),
    v3,
    compressed: v3 && typeByte !== type,
  };
}

/** True when the record at `at` (header and full body inside `buf`) has a matching crc. */
export function checkRecordCrc(buf: Uint8Array, view: DataView, at: number, header: RecordHeader): boolean {
  const stored = header.crc;
  view.setUint32(at + 21, 0, true);
  const crc = crc32Range(buf, at, at + HEADER_SIZE + header.length);
  view.setUint32(at + 21, stored, true);
  return crc === stored;
}

/**
 * Index of the next possible magic, v2 (`EE FE EF EE`) or v3 (`33 FE EF EE`), at or after
 * `from` (the first byte of a candidate header), or -1. Which format it is, readHeader says.
 */
export function findNextHeader(buf: Uint8Array, from: number): number {
  for (let i = Math.max(from, 0) + 13; i + 12 <= buf.length; i++) {
    i = buf.indexOf(0xfe, i);
    if (i < 0 || i + 12 > buf.length) return -1;
    const first = buf[i - 1];
    if ((first === 0xee || first === 0x33) && buf[i + 1] === 0xef && buf[i + 2] === 0xee) return i - 13;
  }
  return -1;
}
