/**
 * Bodies are bytes: a text message that starts with U+FEFF (a byte-order mark), or holds one
 * anywhere, comes back byte for byte, through every produce format, on disk, through every
 * consume format and through the client's decoding. (TextDecoder drops a leading BOM unless
 * told `ignoreBOM: true`, and so do `Response.text()` / `Request.text()`.)
 */
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { createClient } from "../../client/index";
import { BATCH_CONTENT_TYPE, decodeBatch, encodeProduceBatch } from "../../runtime/index";
import { messageJSON } from "../../src/format/message";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { jsonHeaders, startServer } from "./_server";

const BOM = "\uFEFF";
const encoder = new TextEncoder();
/** The only faithful way to read UTF-8 here: a leading BOM is kept. */
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** Random text, reproducible (mulberry32), from ASCII, escapes, controls, BMP, astral and BOMs. */
function randomTexts(seed: number, count: number): string[] {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const pools = ["abcXYZ019 -_.", '"\\/', "\n\t\r\u0000\u0001\u001f", "éßΩж€\u00a0", "日本語한국어", "😀🎉𝄞", BOM, "\uFFFE\uFFFD\uFFFF"];
  return Array.from({ length: count }, (_, i) => {
    let text = BOM.repeat(1 + (i % 3)); // one, two or three leading BOMs
    const length = Math.floor(next() * 40);
    for (let k = 0; k < length; k++) {
      const pool = [...pools[Math.floor(next() * pools.length)]!];
      text += pool[Math.floor(next() * pool.length)];
    }
    return text;
  });
}

/** Edge cases first, then random ones: all start with a BOM, some hold more of them inside. */
const TEXTS = [BOM, BOM + BOM + BOM, `${BOM}ascii only`, `${BOM}"quoted"\\`, `${BOM}a${BOM}b${BOM}`, `${BOM}{"json":true}`, ...randomTexts(0xb0b, 40)];

const q = (queue: string) => `/api/v1/queues/${queue}`;

/** What the engine stored, as bytes (`raw`: no decoding in the way). */
async function storedBytes(dir: string, queue: string): Promise<Uint8Array[]> {
  const consumer = await QueueConsumer.open(queue, "disk", { driver: fsDriver({ dir }) });
  try {
    const messages = await consumer.read({ max: 10_000, maxBytes: 2 ** 30, raw: true });
    return messages.map((m) => {
      expect(m.type).toBe("string");
      return Uint8Array.from(m.data as Uint8Array);
    });
  } finally {
    await consumer.close();
  }
}

/** Produces `texts` to `queue` one way, then checks every path back. */
async function roundTrip(produce: (s: Awaited<ReturnType<typeof startServer>>, queue: string) => Promise<void>): Promise<void> {
  const s = await startServer();
  const queue = "bom";
  await produce(s, queue);

  // On disk: the exact UTF-8 bytes that were sent.
  expect(await storedBytes(s.dir, queue)).toEqual(TEXTS.map((t) => encoder.encode(t)));

  // JSON consume, read as bytes (res.json() would be fine too: the body starts with "{").
  const res = await s.get(`${q(queue)}/consumers/json/messages?max_messages=1000`);
  expect(res.status).toBe(200);
  const body = JSON.parse(decoder.decode(await res.arrayBuffer())) as { messages: { data: string }[] };
  expect(body.messages.map((m) => m.data)).toEqual(TEXTS);

  // Binary consume: each record's bytes as stored.
  const bin = await s.get(`${q(queue)}/consumers/binary/messages?max_messages=1000`, { headers: { accept: BATCH_CONTENT_TYPE } });
  const records = decodeBatch(new Uint8Array(await bin.arrayBuffer()));
  expect(records.map((r) => r.size)).toEqual(TEXTS.map((t) => encoder.encode(t).length));
  expect(records.map((r) => r.data)).toEqual(TEXTS);

  // The client, both formats.
  const client = createClient({ baseURL: s.url });
  const viaJSON = await client.consume(queue, "client-json", { maxMessages: 1000 });
  expect(viaJSON.messages.map((m) => m.data)).toEqual(TEXTS);
  const viaBinary = await client.consume(queue, "client-binary", { maxMessages: 1000, format: "binary" });
  expect(viaBinary.messages.map((m) => m.data)).toEqual(TEXTS);
}

describe("a byte-order mark is data", () => {
  it("survives a JSON produce body", async () => {
    await roundTrip(async (s, queue) => {
      const res = await s.post(`${q(queue)}/messages`, encoder.encode(JSON.stringify({ messages: TEXTS })), jsonHeaders);
      expect(res.status).toBe(201);
    });
  });

  it("survives text/plain produce bodies", async () => {
    await roundTrip(async (s, queue) => {
      for (const text of TEXTS) {
        const res = await s.post(`${q(queue)}/messages`, encoder.encode(text), { "content-type": "text/plain; charset=utf-8" });
        expect(res.status).toBe(201);
      }
    });
  });

  it("survives a binary batch produce body (and the client's produce)", async () => {
    await roundTrip(async (s, queue) => {
      const res = await s.post(`${q(queue)}/messages`, encodeProduceBatch(TEXTS), { "content-type": BATCH_CONTENT_TYPE });
      expect(res.status).toBe(201);
    });
    await roundTrip(async (s, queue) => {
      expect((await createClient({ baseURL: s.url }).produce(queue, TEXTS, { format: "binary" })).count).toBe(TEXTS.length);
    });
  });

  it("a JSON produce envelope may still start with a BOM (RFC 8259 lets a parser skip it): the messages keep theirs", async () => {
    const s = await startServer();
    const res = await s.post(`${q("env")}/messages`, encoder.encode(BOM + JSON.stringify({ message: `${BOM}x` })), jsonHeaders);
    expect(res.status).toBe(201);
    expect(await storedBytes(s.dir, "env")).toEqual([encoder.encode(`${BOM}x`)]);
  });

  it("Basic credentials keep a leading U+FEFF: it is part of the username", async () => {
    const s = await startServer({
      auth: {
        users: [
          { username: `${BOM}bom`, password: "pw" },
          { username: "plain", password: "pw" },
        ],
      },
    });
    const basic = (userPass: string) => ({ headers: { authorization: `Basic ${Buffer.from(userPass).toString("base64")}` } });
    expect((await s.get("/api/v1/queues", basic(`${BOM}bom:pw`))).status).toBe(200);
    expect((await s.get("/api/v1/queues", basic("bom:pw"))).status).toBe(401);
    expect((await s.get("/api/v1/queues", basic(`${BOM}plain:pw`))).status).toBe(401);
  });

  it("messageJSON reads bytes as read() gives text: a BOM is not dropped (so it is not JSON)", () => {
    const text = `${BOM}{"a":1}`;
    expect(() => messageJSON({ data: text })).toThrow(SyntaxError);
    expect(() => messageJSON({ data: encoder.encode(text) })).toThrow(SyntaxError);
    expect(messageJSON({ data: encoder.encode(`{"a":"${BOM}"}`) })).toEqual({ a: BOM });
  });
});
