/**
 * A shared consumer's outcome log (`Q_info_outc_C`, docs/format.md#files-of-v-queues-own): what became of
 * the messages it handed out, one event per frame of a side log (storage/side-log.ts:
 * `u32 length | payload | u32 CRC-32`). An event's payload, little-endian:
 *
 *   u8 kind (1 completed, 2 failed, 3 dead, 4 progress) | u8 flags | f64 id | f64 at (ms) |
 *   f64 part | f64 offset | u32 deliveries | [u32 seq] | [f64 retryAt] | [u32 n, n bytes error, UTF-8] |
 *   [u32 n, n bytes value, JSON in UTF-8]
 *
 * each bracketed field there only when its flag is set (1 seq, 2 retryAt, 4 error, 8 value: a
 * completed event's result, a progress event's progress). Ids count up by one per event from 1
 * and are never reused: a compaction, which drops the oldest events, starts the file with a
 * NEXT frame (`u8 5 | f64 id`), the id the next event takes.
 * Binary, not JSON: an event is written per acknowledged message, and its cost is the ack's.
 */
import { VQueueError } from "../core/errors";
import { crc32Range } from "./crc32";

/** How a message ended (`completed`, `dead`), failed once and comes again (`failed`), or how far its handler is (`progress`). */
export type OutcomeKind = "completed" | "failed" | "dead" | "progress";

const KINDS: readonly OutcomeKind[] = ["completed", "failed", "dead", "progress"];
const NEXT = 5;
const SEQ = 1;
const RETRY_AT = 2;
const ERROR = 4;
const VALUE = 8;
/** Kind, flags, id, at, part, offset, deliveries. */
const FIXED_BYTES = 2 + 8 * 4 + 4;

/** An event as the log keeps it (of one queue: a partitioned queue's partition has its own log). */
export interface StoredOutcome {
  /** One more than the event before it in this log. */
  id: number;
  kind: OutcomeKind;
  /** When it happened (ms since the epoch). */
  at: number;
  part: number;
  offset: number;
  /** Its seq in its part, when the holder knew it (a message acked through an earlier holder's lease may lack it). */
  seq?: number;
  /** Its deliveries so far, this one included. */
  deliveries: number;
  /** `completed`: the value its worker gave with the ack. */
  result?: unknown;
  /** `progress`: the value its worker reported. */
  progress?: unknown;
  /** `failed`, `dead`: the error its worker gave with the nack. */
  error?: string;
  /** `failed`: when it may go out again (ms since the epoch). */
  retryAt?: number;
}

/** The message an event is about, as the holder knows it (a window entry is one). */
export interface OutcomeSubject {
  part: number;
  offset: number;
  seq?: number;
  deliveries: number;
}

/** What some events say besides their message. */
export interface OutcomeDetails {
  error?: string;
  retryAt?: number;
  /** The result or progress, as `outcomeValueJson` gave it. */
  valueJson?: string;
}

/** Largest result or progress value, as JSON: the log keeps outcomes, not payloads. */
export const MAX_OUTCOME_BYTES = 64 * 1024;

const utf8 = new TextEncoder();
const text = new TextDecoder();

/**
 * A result or progress value as JSON, checked: serializable and within `MAX_OUTCOME_BYTES`
 * (`E_OPTION` otherwise). `undefined` stays undefined (no value).
 */
export function outcomeValueJson(name: "result" | "progress", value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: it cannot be written as JSON (${(error as Error).message}); use JSON values (objects, arrays, strings, numbers, booleans, null).`,
    );
  }
  if (json === undefined)
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: a ${typeof value} cannot be written as JSON; use JSON values (objects, arrays, strings, numbers, booleans, null).`,
    );
  // UTF-8 is at most 3 bytes a UTF-16 unit: measured only when it may be over.
  const bytes = json.length * 3 <= MAX_OUTCOME_BYTES ? json.length : utf8.encode(json).length;
  if (bytes > MAX_OUTCOME_BYTES)
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: ${bytes} bytes as JSON, the limit is ${MAX_OUTCOME_BYTES}; keep large data elsewhere and return where it is.`,
    );
  return json;
}

/**
 * Events framed for the side log, encoded as they come into one growing buffer (no object per
 * event): `take` hands the frames over, ready to append.
 */
export class OutcomeFrames {
  #bytes = new Uint8Array(16 * 1024);
  #view = new DataView(this.#bytes.buffer);
  #length = 0;
  /** Events since the last `take`. */
  count = 0;

  add(kind: OutcomeKind, id: number, at: number, message: OutcomeSubject, details?: OutcomeDetails): void {
    const error = details?.error;
    const value = details?.valueJson;
    // Strings at their longest in UTF-8 (3 bytes a unit); the frame is cut to what they took.
    this.#reserve(8 + FIXED_BYTES + 12 + (error === undefined ? 0 : 4 + error.length * 3) + (value === undefined ? 0 : 4 + value.length * 3));
    const view = this.#view;
    const start = this.#length;
    let pos = start + 4;
    const flags =
      (message.seq === undefined ? 0 : SEQ) |
      (details?.retryAt === undefined ? 0 : RETRY_AT) |
      (error === undefined ? 0 : ERROR) |
      (value === undefined ? 0 : VALUE);
    view.setUint8(pos, KINDS.indexOf(kind) + 1);
    view.setUint8(pos + 1, flags);
    view.setFloat64(pos + 2, id, true);
    view.setFloat64(pos + 10, at, true);
    view.setFloat64(pos + 18, message.part, true);
    view.setFloat64(pos + 26, message.offset, true);
    view.setUint32(pos + 34, message.deliveries, true);
    pos += FIXED_BYTES;
    if (message.seq !== undefined) {
      view.setUint32(pos, message.seq, true);
      pos += 4;
    }
    if (details?.retryAt !== undefined) {
      view.setFloat64(pos, details.retryAt, true);
      pos += 8;
    }
    for (const string of [error, value]) {
      if (string === undefined) continue;
      const { written } = utf8.encodeInto(string, this.#bytes.subarray(pos + 4));
      view.setUint32(pos, written, true);
      pos += 4 + written;
    }
    this.#close(start, pos);
  }

  /** The frames added since the last take. */
  take(): Uint8Array {
    const frames = this.#bytes.slice(0, this.#length);
    this.#length = 0;
    this.count = 0;
    return frames;
  }

  /** Writes the frame's length and CRC-32 around the payload from `start + 4` to `end`. */
  #close(start: number, end: number): void {
    this.#view.setUint32(start, end - start - 4, true);
    this.#view.setUint32(end, crc32Range(this.#bytes, start, end), true);
    this.#length = end + 4;
    this.count++;
  }

  #reserve(bytes: number): void {
    if (this.#length + bytes <= this.#bytes.length) return;
    const grown = new Uint8Array(Math.max(this.#bytes.length * 2, this.#length + bytes));
    grown.set(this.#bytes.subarray(0, this.#length));
    this.#bytes = grown;
    this.#view = new DataView(grown.buffer);
  }
}

/** A compaction's first payload: the id the next event takes. */
export function encodeNextId(next: number): Uint8Array {
  const payload = new Uint8Array(9);
  payload[0] = NEXT;
  new DataView(payload.buffer).setFloat64(1, next, true);
  return payload;
}

/**
 * An event's id and time, read without decoding the rest (what opening and compacting a log look
 * at), a NEXT frame's id, or undefined for neither.
 */
export function outcomeHead(payload: Uint8Array): { id: number; at: number } | { next: number } | undefined {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  if (payload[0] === NEXT && payload.length === 9) return { next: view.getFloat64(1, true) };
  if (payload.length < FIXED_BYTES || payload[0]! < 1 || payload[0]! > KINDS.length) return undefined;
  return { id: view.getFloat64(2, true), at: view.getFloat64(10, true) };
}

/** A frame read back: an event, the next id (a compaction's first frame), or undefined when it is neither. */
export function decodeOutcome(payload: Uint8Array): StoredOutcome | { next: number } | undefined {
  const view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  if (payload[0] === NEXT && payload.length === 9) return { next: view.getFloat64(1, true) };
  const kind = KINDS[payload[0]! - 1];
  if (kind === undefined || payload.length < FIXED_BYTES) return undefined;
  const flags = payload[1]!;
  const event: StoredOutcome = {
    id: view.getFloat64(2, true),
    kind,
    at: view.getFloat64(10, true),
    part: view.getFloat64(18, true),
    offset: view.getFloat64(26, true),
    deliveries: view.getUint32(34, true),
  };
  let pos = FIXED_BYTES;
  try {
    if (flags & SEQ) {
      event.seq = view.getUint32(pos, true);
      pos += 4;
    }
    if (flags & RETRY_AT) {
      event.retryAt = view.getFloat64(pos, true);
      pos += 8;
    }
    const string = (): string => {
      const length = view.getUint32(pos, true);
      if (pos + 4 + length > payload.length) throw new RangeError("past the frame");
      const value = text.decode(payload.subarray(pos + 4, pos + 4 + length));
      pos += 4 + length;
      return value;
    };
    if (flags & ERROR) event.error = string();
    if (flags & VALUE) {
      const value: unknown = JSON.parse(string());
      if (kind === "progress") event.progress = value;
      else event.result = value;
    }
  } catch {
    return undefined;
  }
  return event;
}

/** Whether a kind is a message's end: `completed` or `dead` (what `waitForOutcome` waits for). */
export const isEnd = (kind: OutcomeKind): boolean => kind === "completed" || kind === "dead";
