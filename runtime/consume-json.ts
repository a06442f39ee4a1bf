/**
 * The JSON body of a consume response, written straight into bytes.
 *
 * Text records are UTF-8 on disk and UTF-8 in the response: a pure-ASCII body is copied
 * (escaping `"`, `\` and control characters) without ever becoming a JS string, which is
 * what made JSON consume cost several times the binary one. Other text goes through
 * TextDecoder and JSON.stringify (invalid UTF-8 becomes U+FFFD, as `read()` gives it; a
 * leading U+FEFF is kept: it is data).
 * The result is byte for byte `JSON.stringify` of the same `ConsumeResponse`.
 */
import { HEADER_SIZE } from "../src/format/record";
import type { Message } from "../src/format/message";
import { toBase64 } from "../protocol/base64";
import { utf8 } from "../protocol/utf8";

const encoder = new TextEncoder();

const Q = 0x22; // "
const BACKSLASH = 0x5c;
const HEX = encoder.encode("0123456789abcdef");
/** JSON.stringify's short escapes: \b \t \n \f \r (0 for none). */
const SHORT_ESCAPES = new Uint8Array(32);
for (const [c, letter] of [
  [0x08, "b"],
  [0x09, "t"],
  [0x0a, "n"],
  [0x0c, "f"],
  [0x0d, "r"],
] as const)
  SHORT_ESCAPES[c] = letter.charCodeAt(0);

/** Bytes that are not copied as they are: control characters, `"`, `\`, and non-ASCII. */
const SPECIAL = new Uint8Array(256).fill(1, 0, 0x20).fill(1, 0x80);
SPECIAL[Q] = SPECIAL[BACKSLASH] = 1;

const PART = encoder.encode('{"part":');
const PARTITION = encoder.encode('{"partition":');
const PARTITION_PART = encoder.encode(',"part":');
const OFFSET = encoder.encode(',"offset":');
const SEQ = encoder.encode(',"seq":');
const STRING_DATA = encoder.encode(',"type":"string","data":');
const OBJECT_DATA = encoder.encode(',"type":"object","data":"');
const BASE64_END = encoder.encode('","encoding":"base64"');
const CURSOR = encoder.encode(',"cursor":"');
/** Room for a message's fixed parts: keys, six integers, punctuation. */
const MESSAGE_OVERHEAD = 240;

/**
 * `JSON.stringify(ConsumeResponse)` as UTF-8 bytes, from messages read with `raw: true`
 * (text as its UTF-8 bytes; decoded strings are accepted too).
 */
export function encodeConsumeJSON(queue: string, consumer: string, messages: Message[], cursor: string | undefined, missed = 0): Uint8Array<ArrayBuffer> {
  return encodeMessagesJSON(
    `{"queue":${JSON.stringify(queue)},"consumer":${JSON.stringify(consumer)},"count":${messages.length},"cursor":${cursor === undefined ? "null" : JSON.stringify(cursor)},${missed > 0 ? `"missed":${missed},` : ""}"messages":[`,
    messages,
  );
}

/** `head` (JSON up to an open `"messages":[`), the messages as `MessageJSON`, then `]}`: any answer whose messages come last. */
export function encodeMessagesJSON(headText: string, messages: Message[]): Uint8Array<ArrayBuffer> {
  const head = encoder.encode(headText);
  // Exact for bytes and for text without escapes, plus room for the largest text to expand.
  let size = head.length + 2;
  let largestText = 0;
  for (const m of messages) {
    size += MESSAGE_OVERHEAD + (m.type === "object" ? Math.ceil(m.size / 3) * 4 : m.size);
    if (m.type === "string" && m.size > largestText) largestText = m.size;
  }
  size += largestText * 5;
  let buf = new Uint8Array(size);
  buf.set(head);
  let at = head.length;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]!;
    const data = typeof m.data === "string" ? m.data : undefined;
    const bytes = typeof m.data === "string" ? undefined : m.data;
    // Text needing escapes may grow (6 bytes for a control byte): make room first.
    const room = MESSAGE_OVERHEAD + (m.type === "object" ? Math.ceil(m.size / 3) * 4 : data === undefined ? m.size * 6 : data.length * 6);
    if (at + room + 2 > buf.length) buf = grow(buf, at, room + 2);
    if (i > 0) buf[at++] = 0x2c; // ,
    // A partitioned queue's message: its partition first, and its cursor names it ("p3:0.78.3").
    const partition = (m as { partition?: number }).partition;
    if (partition === undefined) at = put(buf, at, PART);
    else {
      at = put(buf, at, PARTITION);
      at = putInteger(buf, at, partition);
      at = put(buf, at, PARTITION_PART);
    }
    at = putInteger(buf, at, m.part);
    at = put(buf, at, OFFSET);
    at = putInteger(buf, at, m.offset);
    at = put(buf, at, SEQ);
    at = putInteger(buf, at, m.seq);
    if (m.type === "object") {
      at = put(buf, at, OBJECT_DATA);
      at = putAscii(buf, at, toBase64(bytes ?? encoder.encode(data!)));
      at = put(buf, at, BASE64_END);
    } else {
      at = put(buf, at, STRING_DATA);
      const end = bytes === undefined ? -1 : putAsciiJsonString(buf, at, bytes);
      if (end >= 0) at = end;
      else at += encoder.encodeInto(JSON.stringify(data ?? utf8.decode(bytes)), buf.subarray(at)).written;
    }
    // cursorAfter(m) (protocol/cursor.ts), written as bytes; test/protocol/cursor.test.ts checks they agree.
    at = put(buf, at, CURSOR);
    if (partition !== undefined) {
      buf[at++] = 0x70; // p
      at = putInteger(buf, at, partition);
      buf[at++] = 0x3a; // :
    }
    at = putInteger(buf, at, m.part);
    buf[at++] = 0x2e; // .
    at = putInteger(buf, at, m.offset + HEADER_SIZE + (m.stored ?? m.size));
    buf[at++] = 0x2e;
    at = putInteger(buf, at, m.seq);
    buf[at++] = Q;
    buf[at++] = 0x7d; // }
  }
  buf[at++] = 0x5d; // ]
  buf[at++] = 0x7d;
  return buf.subarray(0, at);
}

// --- Internal helpers: each writes at `at` and returns where it stopped ---

function grow(buf: Uint8Array<ArrayBuffer>, used: number, more: number): Uint8Array<ArrayBuffer> {
  const next = new Uint8Array(Math.max(buf.length * 2, used + more));
  next.set(buf.subarray(0, used));
  return next;
}

function put(buf: Uint8Array, at: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) buf[at++] = bytes[i]!;
  return at;
}

function putAscii(buf: Uint8Array, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) buf[at++] = text.charCodeAt(i);
  return at;
}

/** A non-negative integer's decimal digits. */
function putInteger(buf: Uint8Array, at: number, n: number): number {
  if (n < 10) {
    buf[at] = 0x30 + n;
    return at + 1;
  }
  let digits = 0;
  for (let x = n; x >= 1; x = Math.floor(x / 10)) digits++;
  const end = at + digits;
  for (let x = n, k = end; x >= 1; x = Math.floor(x / 10)) buf[--k] = 0x30 + (x % 10);
  return end;
}

/**
 * UTF-8 text bytes as a JSON string, if they are all ASCII (else -1, and nothing counts as
 * written). The caller has made room for six bytes per input byte.
 */
function putAsciiJsonString(buf: Uint8Array, at: number, bytes: Uint8Array): number {
  buf[at++] = Q;
  // Most bodies need no escape at all: copied as they are checked, in one pass.
  let i = 0;
  for (; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (SPECIAL[c] !== 0) break;
    buf[at++] = c;
  }
  for (; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c >= 0x80) return -1;
    if (c >= 0x20 && c !== Q && c !== BACKSLASH) buf[at++] = c;
    else if (c === Q || c === BACKSLASH) {
      buf[at++] = BACKSLASH;
      buf[at++] = c;
    } else {
      buf[at++] = BACKSLASH;
      const short = SHORT_ESCAPES[c]!;
      if (short !== 0) buf[at++] = short;
      else {
        buf[at++] = 0x75; // \u00XX
        buf[at++] = 0x30;
        buf[at++] = 0x30;
        buf[at++] = HEX[c >> 4]!;
        buf[at++] = HEX[c & 15]!;
      }
    }
  }
  buf[at++] = Q;
  return at;
}
