import type { MessageJSON } from "../protocol/api";
import { fromBase64 } from "../protocol/base64";
import type { BatchRecord } from "../protocol/binary";
import { cursorAfter } from "../protocol/cursor";

/** Where a message is, and how to commit it: the API's own fields (`protocol/api.ts`); `partition` on a partitioned queue. */
type MessageMeta = Pick<MessageJSON, "partition" | "part" | "offset" | "seq" | "cursor">;

/** A text message (JSON included, as its text). */
export interface TextMessage extends MessageMeta {
  type: "string";
  data: string;
  /** Only set with `json: true`. */
  json?: undefined;
}

/** A bytes message: never parsed, `json: true` or not. */
export interface BytesMessage extends MessageMeta {
  type: "object";
  data: Uint8Array;
  json?: undefined;
}

/** With `json: true`: a text message parsed as JSON. */
export interface ParsedMessage<T> extends MessageMeta {
  type: "string";
  json: true;
  data: T;
}

/**
 * With `json: true`: a text message that is not valid JSON. It comes as its text with the
 * parse error rather than failing its batch: one bad message must not stop a consumer.
 */
export interface UnparsedMessage extends MessageMeta {
  type: "string";
  json: false;
  data: string;
  error: SyntaxError;
}

/**
 * A message as the client hands it out, narrowed by `type` ("string" | "object") and, with
 * `json: true`, by `json`. `ClientMessage` is one of a plain consume (text or bytes);
 * `ClientMessage<T>` one of `json: true`, where text parsed as JSON is a `T`.
 */
export type ClientMessage<T = never> = [T] extends [never] ? TextMessage | BytesMessage : ParsedMessage<T> | UnparsedMessage | BytesMessage;

/** Either kind: what the client's internals pass along without looking at `data`. */
export type AnyClientMessage = ClientMessage | ClientMessage<unknown>;

export function fromJSONMessage(message: MessageJSON, parseJSON: boolean): AnyClientMessage {
  const { part, offset, seq, cursor } = message;
  const out: AnyClientMessage =
    message.encoding === "base64"
      ? { part, offset, seq, type: "object", data: fromBase64(message.data)!, cursor }
      : textMessage(part, offset, seq, message.data, cursor, parseJSON);
  // Only on a partitioned queue's messages (no `partition: undefined` on the others).
  if (message.partition !== undefined) out.partition = message.partition;
  return out;
}

export function fromBatchRecord(record: BatchRecord, parseJSON: boolean): AnyClientMessage {
  const { part, offset, seq, partition } = record;
  // A partitioned queue's (VQP1) cursor names its partition, as the JSON answer's does.
  const cursor = partition === undefined ? cursorAfter(record) : `p${partition}:${cursorAfter(record)}`;
  const message =
    typeof record.data !== "string"
      ? ({ part, offset, seq, type: "object", data: record.data, cursor } as AnyClientMessage)
      : textMessage(part, offset, seq, record.data, cursor, parseJSON);
  if (partition !== undefined) message.partition = partition;
  return message;
}

function textMessage(part: number, offset: number, seq: number, data: string, cursor: string, parseJSON: boolean): AnyClientMessage {
  // Per message of every batch: a plain text one without the spread's object in between.
  if (!parseJSON) return { part, offset, seq, type: "string", data, cursor };
  return { part, offset, seq, ...textOrJSON(data, parseJSON), cursor } as AnyClientMessage;
}

/** A text body as given, or parsed as JSON (with the parse error when it is not JSON). */
export function textOrJSON(
  data: string,
  parseJSON: boolean,
):
  | Pick<TextMessage, "type" | "data" | "json">
  | Pick<ParsedMessage<unknown>, "type" | "data" | "json">
  | Pick<UnparsedMessage, "type" | "data" | "json" | "error"> {
  if (!parseJSON) return { type: "string", data };
  try {
    return { type: "string", json: true, data: JSON.parse(data) as unknown };
  } catch (error) {
    return { type: "string", json: false, data, error: error as SyntaxError };
  }
}
