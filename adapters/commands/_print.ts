import { cursorAfter } from "../../protocol/cursor";

/** A message as the commands print it (from the engine or from a binary batch of the API). */
export interface Printable {
  part: number;
  offset: number;
  seq: number;
  type: "string" | "object";
  data: string | Uint8Array;
}

/** What marks a bytes message in text output: `base64:` then the bytes in base64. */
export const BYTES_MARKER = "base64:";

/**
 * One message as one line. Text as it is; bytes (an `O` record) as `base64:<base64>`, so they
 * cannot pass for text. With `json`: `{part, offset, seq, type, data, cursor}`, bytes with
 * `"type": "object"`, `data` in base64 and `"encoding": "base64"` (the HTTP API's shape).
 */
export function formatMessage(m: Printable, json: boolean): string {
  const bytes = typeof m.data !== "string";
  const data = bytes ? Buffer.from(m.data as Uint8Array).toString("base64") : (m.data as string);
  if (!json) return bytes ? `${BYTES_MARKER}${data}\n` : `${data}\n`;
  const cursor = cursorAfter({ ...m, size: bytes ? (m.data as Uint8Array).length : Buffer.byteLength(m.data as string) });
  return `${JSON.stringify({ part: m.part, offset: m.offset, seq: m.seq, type: m.type, data, ...(bytes ? { encoding: "base64" } : {}), cursor })}\n`;
}
