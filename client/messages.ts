import { cursorAfter } from "../src/cursor";
import type { BatchRecord } from "../runtime/binary";
import type { MessageJSON } from "../runtime/api";
import { fromBase64 } from "../runtime/codec";

/** A message as the client hands it out. */
export interface ClientMessage<T = unknown> {
  part: number;
  offset: number;
  seq: number;
  /** `string` for text (JSON included), `object` for bytes. */
  type: "string" | "object";
  /** Text as a string (parsed when `json: true`), bytes as a Uint8Array. */
  data: string | Uint8Array | T;
  /** Commits this message and everything before it. */
  cursor: string;
}

export function fromJSONMessage<T>(message: MessageJSON, parseJSON: boolean): ClientMessage<T> {
  const data = message.encoding === "base64" ? fromBase64(message.data)! : parseJSON ? (JSON.parse(message.data) as T) : message.data;
  return { part: message.part, offset: message.offset, seq: message.seq, type: message.type, data, cursor: message.cursor };
}

export function fromBatchRecord<T>(record: BatchRecord, parseJSON: boolean): ClientMessage<T> {
  const cursor = cursorAfter(record);
  const data = typeof record.data === "string" && parseJSON ? (JSON.parse(record.data) as T) : record.data;
  return { part: record.part, offset: record.offset, seq: record.seq, type: record.type, data, cursor };
}

