// @ts-check
/** One message as the browser shows it: text as text, JSON pretty-printed, bytes as a hex dump; a dead letter's body likewise, with its origin. */
import { deadLetterIn, letterDetails } from "./dead-letter.js";
import { h } from "./dom.js";
import { bytes } from "./format.js";

/** @typedef {import("../protocol/api").MessageJSON} MessageJSON */

/** Bytes shown of a binary message; the rest is counted. */
const HEX_LIMIT = 4096;

/** @param {MessageJSON} m */
export function messageCard(m) {
  // A dead letter: its original body shown as any message's, its origin and times beside it.
  const letter = deadLetterIn(m);
  const { kind, text, size } = show(letter ? { data: letter.data, encoding: letter.type === "object" ? "base64" : undefined } : m);
  return h(
    "article",
    { class: "message", "data-kind": kind, "data-dead-letter": Boolean(letter) },
    h(
      "header",
      {},
      h("strong", {}, `#${m.seq}`),
      h("span", { class: "muted" }, `${m.partition === undefined ? "" : `partition ${m.partition} · `}part ${m.part} · offset ${m.offset}`),
      letter && h("span", { class: "badge dead" }, "Dead letter"),
      h("span", { class: `badge ${kind}` }, kind === "json" ? "JSON" : kind === "text" ? "Text" : "Bytes"),
      h("span", { class: "muted" }, bytes(size)),
      h("code", { class: "cursor", title: "Cursor: commits up to and including this message" }, m.cursor),
    ),
    letter && letterDetails(letter),
    h("pre", { class: "body", tabindex: 0 }, text),
  );
}

/**
 * A body as it is shown: JSON pretty-printed, text as text, bytes (base64 on the wire) as a hex dump.
 * @param {{ data: string, encoding?: "base64" }} m
 * @returns {{ kind: "json" | "text" | "bytes", text: string, size: number }}
 */
function show(m) {
  if (m.encoding === "base64") {
    const raw = atob(m.data);
    const data = Uint8Array.from(raw, (c) => c.charCodeAt(0));
    return { kind: "bytes", text: hexDump(data), size: data.length };
  }
  const size = new TextEncoder().encode(m.data).length;
  const trimmed = m.data.trim();
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(trimmed), null, 2), size };
    } catch {
      // Not JSON after all: shown as text.
    }
  }
  return { kind: "text", text: m.data, size };
}

/**
 * `00000000  7b 22 61 22 3a 31 7d 00  ff 10 ...  |{"a":1}.....|`, up to HEX_LIMIT bytes.
 * @param {Uint8Array} data
 */
export function hexDump(data) {
  const lines = [];
  const end = Math.min(data.length, HEX_LIMIT);
  for (let at = 0; at < end; at += 16) {
    const row = data.subarray(at, Math.min(at + 16, end));
    let hex = "";
    let ascii = "";
    for (let i = 0; i < 16; i++) {
      const b = row[i];
      hex += (b === undefined ? "  " : b.toString(16).padStart(2, "0")) + (i === 7 ? "  " : " ");
      if (b !== undefined) ascii += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".";
    }
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex} |${ascii}|`);
  }
  if (data.length > end) lines.push(`… ${data.length - end} more bytes`);
  if (data.length === 0) lines.push("(empty)");
  return lines.join("\n");
}
