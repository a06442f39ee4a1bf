/**
 * The binary batch framing (`application/vnd.v-queue.batch`), for consume responses and
 * produce bodies. All integers little-endian.
 *
 * ```
 * batch   = magic "VQB1" (4 bytes) | count u32 | record * count
 * record  = type u8 ('S' 0x53 text, 'O' 0x4F bytes) | length u32 | part u32 | seq u32
 *           | offset u64 | body (length bytes; text is UTF-8)
 * ```
 * In a produce body, `part`, `seq` and `offset` are ignored (send zeros).
 * A consume response also carries the commit cursor in the `x-vq-cursor` header.
 *
 * A partitioned queue's consume answer is the same with magic "VQP1" and each record's
 * partition after its offset (`part`, `seq`, `offset` are positions in that partition; the
 * composite cursor is in `x-vq-cursor`):
 * ```
 * record  = type u8 | length u32 | part u32 | seq u32 | offset u64 | partition u32 | body
 * ```
 *
 * A lease answer (`POST .../lease` with `Accept: application/vnd.v-queue.batch`) is its own
 * framing, magic "VQL1": each record carries its lease, and the header the server's clock (to
 * know how long the leases run without comparing clocks).
 * ```
 * leases  = magic "VQL1" (4 bytes) | count u32 | now f64 (ms since the epoch) | record * count
 * record  = type u8 | length u32 | part u32 | seq u32 | offset u64 | lease u64
 *           | deliveries u32 | leaseUntil f64 (ms since the epoch) | body (length bytes)
 * ```
 * The lease token to ack with is `"<part>.<offset>.<lease>"` in decimal. A partitioned queue's
 * lease answer is the same with magic "VQM1" and each record's partition after its `leaseUntil`
 * (its token is `"p<partition>:<part>.<offset>.<lease>"`):
 * ```
 * record  = type u8 | length u32 | part u32 | seq u32 | offset u64 | lease u64
 *           | deliveries u32 | leaseUntil f64 | partition u32 | body
 * ```
 */
import type { Message } from "../src/format/message";
// The record type bytes of the on-disk format, the same on the wire.
import { TYPE_OBJECT, TYPE_STRING } from "../src/format/record";
import type { MessageJSON, MessagePositionJSON } from "./api";
import { ProtocolError } from "./errors";
import { utf8Strict } from "./utf8";

export const BATCH_CONTENT_TYPE = "application/vnd.v-queue.batch";
export const BATCH_MAGIC = 0x31425156; // "VQB1" read as a little-endian u32
export const BATCH_HEADER = 8;
export const RECORD_HEADER = 21;
export const PARTITIONED_MAGIC = 0x31505156; // "VQP1" read as a little-endian u32
export const PARTITIONED_RECORD_HEADER = 25;

/** What a frame needs of a message: text may be a string or its UTF-8 bytes (`size` is the byte length); `partition` makes it a VQP1 frame. */
export type FramedMessage = Pick<Message, "type" | "data" | "size" | "part" | "seq" | "offset"> & { partition?: number };

const encoder = new TextEncoder();

/** Frames messages as read by a consumer: VQB1, or VQP1 when `partitioned` (each message has its `partition`). */
export function encodeBatch(messages: FramedMessage[], partitioned = false): Uint8Array<ArrayBuffer> {
  const header = partitioned ? PARTITIONED_RECORD_HEADER : RECORD_HEADER;
  let total = BATCH_HEADER;
  for (const m of messages) total += header + m.size;
  const buf = new Uint8Array(total);
  const view = new DataView(buf.buffer);
  view.setUint32(0, partitioned ? PARTITIONED_MAGIC : BATCH_MAGIC, true);
  view.setUint32(4, messages.length, true);
  let at = BATCH_HEADER;
  for (const m of messages) {
    const body = at + header;
    // Text may come decoded (a string) or raw (its UTF-8 bytes, from `read({ raw: true })`).
    const length = typeof m.data === "string" ? encoder.encodeInto(m.data, buf.subarray(body, body + m.size)).written : (buf.set(m.data, body), m.size);
    buf[at] = m.type === "string" ? TYPE_STRING : TYPE_OBJECT;
    view.setUint32(at + 1, length, true);
    view.setUint32(at + 5, m.part, true);
    view.setUint32(at + 9, m.seq, true);
    view.setUint32(at + 13, m.offset % 0x1_0000_0000, true);
    view.setUint32(at + 17, Math.floor(m.offset / 0x1_0000_0000), true);
    if (partitioned) view.setUint32(at + 21, m.partition!, true);
    at = body + length;
  }
  return at === total ? buf : buf.subarray(0, at);
}

/** Frames messages to produce (positions zero). */
export function encodeProduceBatch(messages: (string | Uint8Array)[]): Uint8Array<ArrayBuffer> {
  return encodeBatch(
    messages.map((m) => {
      const data = typeof m === "string" ? encoder.encode(m) : m;
      return { type: typeof m === "string" ? "string" : "object", data, size: data.length, part: 0, seq: 0, offset: 0 };
    }),
  );
}

/** Decoded record of a consume response: the JSON API's message fields, with bytes as bytes and no cursor (it is `cursorAfter(record)`). */
export interface BatchRecord extends MessagePositionJSON {
  type: MessageJSON["type"];
  data: string | Uint8Array;
  /** Body size in bytes (UTF-8 for text). */
  size: number;
  /** A VQP1 record's partition (a partitioned queue's consume answer). */
  partition?: number;
}

/**
 * Parses a batch, VQB1 (or VQP1 where `partitioned` allows it: a consume answer); throws a
 * `ProtocolError`: `E_BODY` on any framing error, `E_TOO_MANY` (checked first, before anything
 * is decoded) when it holds more than `maxMessages`. Bodies of `O` records are views into `buf`.
 */
export function decodeBatch(buf: Uint8Array, maxMessages = Number.MAX_SAFE_INTEGER, partitioned = false): BatchRecord[] {
  const bad = (why: string) => new ProtocolError("E_BODY", `Invalid ${BATCH_CONTENT_TYPE} body: ${why}.`);
  if (buf.length < BATCH_HEADER) throw bad("shorter than its 8-byte header");
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const magic = view.getUint32(0, true);
  const hasPartition = partitioned && magic === PARTITIONED_MAGIC;
  if (magic !== BATCH_MAGIC && !hasPartition) throw bad(partitioned ? 'it does not start with "VQB1" or "VQP1"' : 'it does not start with "VQB1"');
  const header = hasPartition ? PARTITIONED_RECORD_HEADER : RECORD_HEADER;
  const count = view.getUint32(4, true);
  if (count > maxMessages) throw new ProtocolError("E_TOO_MANY", `Too many messages in one request: ${count}, the limit is ${maxMessages}.`);
  if (count > (buf.length - BATCH_HEADER) / header) throw bad(`count ${count} does not fit in ${buf.length} bytes`);
  const out: BatchRecord[] = new Array(count);
  let at = BATCH_HEADER;
  for (let i = 0; i < count; i++) {
    if (at + header > buf.length) throw bad(`record ${i} is cut off`);
    const type = buf[at];
    const length = view.getUint32(at + 1, true);
    const start = at + header;
    if (start + length > buf.length) throw bad(`record ${i} is cut off`);
    if (type !== TYPE_STRING && type !== TYPE_OBJECT) throw bad(`record ${i} has type 0x${type!.toString(16)}, expected 'S' or 'O'`);
    const body = buf.subarray(start, start + length);
    let data: string | Uint8Array = body;
    if (type === TYPE_STRING) {
      try {
        data = utf8Strict.decode(body);
      } catch {
        throw bad(`record ${i} is marked text ('S') but is not valid UTF-8`);
      }
    }
    out[i] = {
      type: type === TYPE_STRING ? "string" : "object",
      part: view.getUint32(at + 5, true),
      seq: view.getUint32(at + 9, true),
      offset: view.getUint32(at + 13, true) + view.getUint32(at + 17, true) * 0x1_0000_0000,
      data,
      size: length,
    };
    if (hasPartition) out[i]!.partition = view.getUint32(at + 21, true);
    at = start + length;
  }
  if (at !== buf.length) throw bad(`${buf.length - at} bytes after the last record`);
  return out;
}

// --- Lease answers ---

export const LEASE_MAGIC = 0x314c5156; // "VQL1" read as a little-endian u32
export const PARTITIONED_LEASE_MAGIC = 0x314d5156; // "VQM1" read as a little-endian u32
export const LEASE_HEADER = 16;
export const LEASE_RECORD_HEADER = 41;
const PARTITIONED_LEASE_RECORD_HEADER = LEASE_RECORD_HEADER + 4;

/** A leased message as framed: a `FramedMessage` and its lease (and `partition`: a partitioned queue's). */
export type FramedLease = FramedMessage & { lease: number; deliveries: number; leaseUntil: number };

/** A decoded lease record: a `BatchRecord` with its lease (the token is `leaseToken(record)`). */
export interface LeaseRecord extends BatchRecord {
  lease: number;
  deliveries: number;
  leaseUntil: number;
}

/** The token naming a lease: `"<part>.<offset>.<lease>"`, or `"p<partition>:<part>.<offset>.<lease>"` for a partitioned queue's. */
export function leaseToken(m: Pick<FramedLease, "part" | "offset" | "lease" | "partition">): string {
  return m.partition === undefined ? `${m.part}.${m.offset}.${m.lease}` : `p${m.partition}:${m.part}.${m.offset}.${m.lease}`;
}

/** The message and hand-out a lease token names, or undefined when it is no token. */
export function parseLeaseToken(token: string): { part: number; offset: number; lease: number } | undefined {
  // A lease id is a safe integer of up to 16 digits (they start from the clock: shared-consumer.ts).
  const match = /^(\d{1,10})\.(\d{1,16})\.(\d{1,16})$/.exec(token);
  if (!match) return undefined;
  const [part, offset, lease] = [Number(match[1]), Number(match[2]), Number(match[3])];
  return Number.isSafeInteger(offset) && Number.isSafeInteger(lease) ? { part, offset, lease } : undefined;
}

/** A partitioned queue's lease token: `"p<partition>:"` and the token within the partition. */
export const PARTITIONED_LEASE_TOKEN = /^p(0|[1-9]\d{0,3}):(.+)$/;

/** The message, hand-out and (on a partitioned queue's token) partition a lease token names, or undefined when it is no token. */
export function parseAnyLeaseToken(token: string): { part: number; offset: number; lease: number; partition?: number } | undefined {
  const match = PARTITIONED_LEASE_TOKEN.exec(token);
  if (!match) return parseLeaseToken(token);
  const ref = parseLeaseToken(match[2]!);
  return ref && { ...ref, partition: Number(match[1]) };
}

/** Frames leased messages, with the server's clock `now`: VQL1, or VQM1 when `partitioned` (each message has its `partition`). */
export function encodeLeases(messages: FramedLease[], now: number, partitioned = false): Uint8Array<ArrayBuffer> {
  const header = partitioned ? PARTITIONED_LEASE_RECORD_HEADER : LEASE_RECORD_HEADER;
  let total = LEASE_HEADER;
  for (const m of messages) total += header + (typeof m.data === "string" ? m.data.length * 3 : m.size);
  const buf = new Uint8Array(total);
  const view = new DataView(buf.buffer);
  view.setUint32(0, partitioned ? PARTITIONED_LEASE_MAGIC : LEASE_MAGIC, true);
  view.setUint32(4, messages.length, true);
  view.setFloat64(8, now, true);
  let at = LEASE_HEADER;
  for (const m of messages) {
    const body = at + header;
    const length = typeof m.data === "string" ? encoder.encodeInto(m.data, buf.subarray(body)).written : (buf.set(m.data, body), m.size);
    buf[at] = m.type === "string" ? TYPE_STRING : TYPE_OBJECT;
    view.setUint32(at + 1, length, true);
    view.setUint32(at + 5, m.part, true);
    view.setUint32(at + 9, m.seq, true);
    setUint64(view, at + 13, m.offset);
    setUint64(view, at + 21, m.lease);
    view.setUint32(at + 29, m.deliveries, true);
    view.setFloat64(at + 33, m.leaseUntil, true);
    if (partitioned) view.setUint32(at + 41, m.partition!, true);
    at = body + length;
  }
  return at === total ? buf : buf.subarray(0, at);
}

/**
 * Parses a lease answer, VQL1 or VQM1 (a partitioned queue's: each record has its `partition`);
 * a framing error is a `ProtocolError` `E_BODY`. Bodies of `O` records are views into `buf`.
 */
export function decodeLeases(buf: Uint8Array): { now: number; records: LeaseRecord[] } {
  const bad = (why: string) => new ProtocolError("E_BODY", `Invalid lease answer: ${why}.`);
  if (buf.length < LEASE_HEADER) throw bad("shorter than its 16-byte header");
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const magic = view.getUint32(0, true);
  if (magic !== LEASE_MAGIC && magic !== PARTITIONED_LEASE_MAGIC) throw bad('it does not start with "VQL1" or "VQM1"');
  const partitioned = magic === PARTITIONED_LEASE_MAGIC;
  const header = partitioned ? PARTITIONED_LEASE_RECORD_HEADER : LEASE_RECORD_HEADER;
  const count = view.getUint32(4, true);
  if (count > (buf.length - LEASE_HEADER) / header) throw bad(`count ${count} does not fit in ${buf.length} bytes`);
  const records: LeaseRecord[] = new Array(count);
  let at = LEASE_HEADER;
  for (let i = 0; i < count; i++) {
    if (at + header > buf.length) throw bad(`record ${i} is cut off`);
    const type = buf[at];
    const length = view.getUint32(at + 1, true);
    const start = at + header;
    if (start + length > buf.length) throw bad(`record ${i} is cut off`);
    if (type !== TYPE_STRING && type !== TYPE_OBJECT) throw bad(`record ${i} has type 0x${type!.toString(16)}, expected 'S' or 'O'`);
    const bytes = buf.subarray(start, start + length);
    let data: string | Uint8Array = bytes;
    if (type === TYPE_STRING) {
      try {
        data = utf8Strict.decode(bytes);
      } catch {
        throw bad(`record ${i} is marked text ('S') but is not valid UTF-8`);
      }
    }
    records[i] = {
      type: type === TYPE_STRING ? "string" : "object",
      part: view.getUint32(at + 5, true),
      seq: view.getUint32(at + 9, true),
      offset: getUint64(view, at + 13),
      lease: getUint64(view, at + 21),
      deliveries: view.getUint32(at + 29, true),
      leaseUntil: view.getFloat64(at + 33, true),
      data,
      size: length,
    };
    if (partitioned) records[i]!.partition = view.getUint32(at + 41, true);
    at = start + length;
  }
  if (at !== buf.length) throw bad(`${buf.length - at} bytes after the last record`);
  return { now: view.getFloat64(8, true), records };
}

function setUint64(view: DataView, at: number, value: number): void {
  view.setUint32(at, value % 0x1_0000_0000, true);
  view.setUint32(at + 4, Math.floor(value / 0x1_0000_0000), true);
}

function getUint64(view: DataView, at: number): number {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 0x1_0000_0000;
}
