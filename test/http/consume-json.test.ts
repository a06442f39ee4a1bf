import { describe, expect, it } from "vitest";
import { formatCursor, positionAfter } from "../../src/format/position";
import type { Message } from "../../src/format/message";
import { encodeConsumeJSON } from "../../runtime/consume-json";

const utf8 = new TextEncoder();

/** A message as `read({ raw: true })` hands it out, at consecutive positions. */
function messages(bodies: (string | Uint8Array | { bytes: Uint8Array })[]): Message[] {
  let offset = 0;
  return bodies.map((body, i) => {
    const isObject = typeof body === "object" && "bytes" in body;
    const data = isObject ? body.bytes : typeof body === "string" ? utf8.encode(body) : body;
    const m: Message = { part: 3, offset, seq: i + 1, type: isObject ? "object" : "string", data, size: data.length, crc: 0 };
    offset += 25 + data.length;
    return m;
  });
}

/** What the API documents: JSON.stringify of the response, text decoded as read() decodes it. */
function reference(queue: string, consumer: string, list: Message[]): string {
  const last = list.at(-1);
  return JSON.stringify({
    queue,
    consumer,
    count: list.length,
    cursor: last ? formatCursor(positionAfter(last)) : null,
    messages: list.map((m) => {
      const bytes = m.data as Uint8Array;
      const cursor = formatCursor(positionAfter(m));
      return m.type === "object"
        ? { part: m.part, offset: m.offset, seq: m.seq, type: m.type, data: Buffer.from(bytes).toString("base64"), encoding: "base64", cursor }
        : { part: m.part, offset: m.offset, seq: m.seq, type: m.type, data: new TextDecoder().decode(bytes), cursor };
    }),
  });
}

function encode(queue: string, consumer: string, list: Message[]): string {
  const last = list.at(-1);
  return new TextDecoder().decode(encodeConsumeJSON(queue, consumer, list, last ? formatCursor(positionAfter(last)) : undefined));
}

describe("the JSON consume body, written as bytes", () => {
  it("is JSON.stringify of the response for escapes, Unicode, invalid UTF-8 and bytes", () => {
    const list = messages([
      "plain",
      "",
      'quote " backslash \\ slash /',
      "\n\r\t\b\f \u0000\u0001\u001f \u007f",
      "é ✓ 😀 \u2028\u2029",
      new Uint8Array([0x61, 0xff, 0x62]), // invalid UTF-8 in a text record
      new Uint8Array([0xed, 0xa0, 0x80]), // an encoded lone surrogate
      new Uint8Array([0xe2, 0x9c]), // cut off
      { bytes: new Uint8Array([0, 1, 2, 253, 254, 255]) },
      { bytes: new Uint8Array() },
      "x".repeat(70_000),
    ]);
    const body = encode("orders.v1", "billing_2-b", list);
    expect(body).toBe(reference("orders.v1", "billing_2-b", list));
    expect(JSON.parse(body).messages[3].data).toBe("\n\r\t\b\f \u0000\u0001\u001f \u007f");
    expect(JSON.parse(body).messages[5].data).toBe("a\ufffdb");
  });

  it("matches JSON.stringify on random bodies, and on an empty batch", () => {
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const bodies = Array.from({ length: 2000 }, (_, i) => {
      const bytes = Uint8Array.from({ length: Math.floor(random() * 40) }, () => (random() < 0.8 ? Math.floor(random() * 128) : Math.floor(random() * 256)));
      return i % 5 === 0 ? { bytes } : bytes;
    });
    const list = messages(bodies);
    expect(encode("q", "c", list)).toBe(reference("q", "c", list));
    expect(encode("q", "c", [])).toBe(reference("q", "c", []));
  });
});
