/** A message as the JSON API gives it. */
export interface MessageJSON {
  part: number;
  offset: number;
  seq: number;
  type: "string" | "object";
  /** Text for `string` messages; base64 for `object` (bytes) messages. */
  data: string;
  /** Present (`"base64"`) when `data` is base64. */
  encoding?: "base64";
  /** Commits up to and including this message. */
  cursor: string;
}

type NodeBuffer = { from(...args: unknown[]): Uint8Array & { toString(encoding: string): string } };
const NodeBuffer = (globalThis as { Buffer?: NodeBuffer }).Buffer;

export function toBase64(bytes: Uint8Array): string {
  if (NodeBuffer) return NodeBuffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

// A flat character class: a grouped, repeated pattern overflows the regexp stack on
// multi-MiB messages.
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decodes standard base64 (with padding); undefined when it is not. */
export function fromBase64(text: string): Uint8Array | undefined {
  if (text.length % 4 !== 0 || !BASE64_RE.test(text)) return undefined;
  if (NodeBuffer) {
    const b = NodeBuffer.from(text, "base64");
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  }
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}
