import { VQueueError } from "../core/errors";
import type { RecordType } from "./record";

/** What `push` accepts: text, bytes, or any JSON value (stored as its JSON text). */
export type MessageInput = string | Uint8Array | ArrayBuffer | JsonValue;
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue | undefined };

/** Where a message landed: its part, the byte offset of its record, its sequence number in the part. */
export interface MessagePosition {
  part: number;
  offset: number;
  seq: number;
}

/** A message read back from a queue. */
export interface Message extends MessagePosition {
  /** `string` for text (`S` records, JSON included), `object` for bytes (`O` records). */
  type: RecordType;
  /**
   * The body: a string for `S` records, bytes for `O` records. Bytes are a view into the
   * chunk they were read with (no copy); copy them to keep a few for long.
   */
  data: string | Uint8Array;
  /** Body size in bytes. */
  size: number;
  /**
   * Bytes the body takes in the part, when that differs from `size`: a compressed body
   * (v3, compression/part-codec.ts). The position after the message counts these.
   */
  stored?: number;
  /** The record's CRC-32 (already checked). */
  crc: number;
}

/** A message normalised for writing: text stays a string until it is encoded into the batch buffer. */
export type EncodedInput = string | Uint8Array;

/** Turns a push argument into a string or bytes, or throws `E_MESSAGE`. */
export function normalizeMessage(input: MessageInput): EncodedInput {
  if (typeof input === "string" || input instanceof Uint8Array) return input;
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) {
    const view = input as ArrayBufferView;
    return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
  }
  if (input === undefined || typeof input === "function" || typeof input === "symbol" || typeof input === "bigint") {
    throw new VQueueError("E_MESSAGE", `A message must be a string, bytes or a JSON value, not ${typeof input}.`);
  }
  if (typeof input === "number" && !Number.isFinite(input)) {
    throw new VQueueError("E_MESSAGE", `A message number must be finite, got ${input}.`);
  }
  try {
    return JSON.stringify(input);
  } catch (error) {
    throw new VQueueError("E_MESSAGE", `A message could not be turned into JSON: ${(error as Error).message}`, { cause: error });
  }
}

// A leading U+FEFF is the message's, as `read()` gives it: bytes and text parse alike.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** Parses a text message as JSON. */
export function messageJSON<T = unknown>(message: Pick<Message, "data">): T {
  const text = typeof message.data === "string" ? message.data : utf8.decode(message.data);
  return JSON.parse(text) as T;
}

/** Exact UTF-8 length of a string (without encoding it). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 2; // a pair: 4 bytes for 2 UTF-16 units
        i++;
      } else bytes += 2; // lone surrogate: U+FFFD, 3 bytes
    } else bytes += 2;
  }
  return bytes;
}
