/**
 * Standard base64 (with padding), as the JSON API carries bytes: Node's Buffer when there is
 * one (several times faster on large bodies), else btoa/atob (browsers, workers).
 */
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
