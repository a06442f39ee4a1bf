import type { MessageJSON } from "../../protocol/api";
import type { BatchRecord } from "../../protocol/binary";
import { cursorAfter } from "../../protocol/cursor";

/** A message as the commands print it: the engine's `Message` and the client's messages both are one. */
export type Printable = Pick<BatchRecord, "part" | "offset" | "seq" | "type" | "data">;

/** What marks a bytes message in text output: `base64:` then the bytes in base64. */
export const BYTES_MARKER = "base64:";

/**
 * One message as one line. Text as it is; bytes (an `O` record) as `base64:<base64>`, so they
 * cannot pass for text. With `json`: `{part, offset, seq, type, data, cursor}`, bytes with
 * `"type": "object"`, `data` in base64 and `"encoding": "base64"` (the HTTP API's shape).
 */
export function formatMessage(m: Printable, json: boolean): string {
  if (!json) return `${textOf(m)}\n`;
  const bytes = typeof m.data !== "string";
  const cursor = cursorAfter({ ...m, size: bytes ? (m.data as Uint8Array).length : Buffer.byteLength(m.data as string) });
  const line: MessageJSON = { ...messageJSON(m), cursor };
  return `${JSON.stringify(line)}\n`;
}

/** A leased message (shared consumers): its lease token, a space, then the message as `formatMessage` prints it; with `json`, one object with `lease`, `deliveries` and `leaseUntil` (no cursor: acks go by lease). */
export function formatLeased(m: Printable & { lease: string; deliveries: number; leaseUntil: number }, json: boolean): string {
  if (!json) return `${m.lease} ${textOf(m)}\n`;
  return `${JSON.stringify({ ...messageJSON(m), lease: m.lease, deliveries: m.deliveries, leaseUntil: m.leaseUntil })}\n`;
}

/** The body as one line of text output: text as it is, bytes as `base64:<base64>`. */
function textOf(m: Printable): string {
  return typeof m.data === "string" ? m.data : `${BYTES_MARKER}${Buffer.from(m.data).toString("base64")}`;
}

/** The HTTP API's message shape without its cursor. */
function messageJSON(m: Printable): Omit<MessageJSON, "cursor"> {
  const bytes = typeof m.data !== "string";
  const data = bytes ? Buffer.from(m.data as Uint8Array).toString("base64") : (m.data as string);
  return { part: m.part, offset: m.offset, seq: m.seq, type: m.type, data, ...(bytes ? { encoding: "base64" as const } : {}) };
}
