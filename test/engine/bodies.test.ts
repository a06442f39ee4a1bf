import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";

/** Random text of code points from several planes, some of them U+FEFF. */
function randomText(next: () => number): string {
  const points = [0xfeff, 0x41, 0x7a, 0xe9, 0x4e2d, 0x1f600, 0x20, 0x0a];
  let text = "";
  const n = Math.floor(next() * 12);
  for (let i = 0; i < n; i++) text += String.fromCodePoint(points[Math.floor(next() * points.length)]!);
  return text;
}

describe("text bodies are kept exactly", () => {
  it("a leading U+FEFF (and any other) comes back from read() as it was pushed", async () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const texts = [
      "\uFEFF",
      "\uFEFFhello",
      "\uFEFF\uFEFFtwo",
      "mid\uFEFFdle",
      ...Array.from({ length: 300 }, () => `\uFEFF${randomText(next)}`),
      ...Array.from({ length: 300 }, () => randomText(next)),
    ];
    const driver = memoryDriver();
    const q = await QueueWriter.open("q", { driver });
    await q.pushBatch(texts);
    const c = await QueueConsumer.open("q", "c", { driver });
    const got: unknown[] = [];
    for (let batch = await c.read({ max: 1000 }); batch.length > 0; batch = await c.read({ max: 1000 })) got.push(...batch.map((m) => m.data));
    expect(got).toEqual(texts);
    await c.close();
    await q.close();
  });
});

describe("text bodies of every length are stored as their UTF-8 bytes", () => {
  // Short ASCII is copied by a loop, longer text by TextEncoder.encodeInto (writer/batch-encoder.ts): both ways, and the switch between them.
  const texts: string[] = [];
  for (let n = 0; n <= 80; n++) {
    const ascii = Array.from({ length: n }, (_, i) => String.fromCharCode(0x20 + ((i * 7 + n) % 95))).join("");
    texts.push(ascii);
    // One non-ASCII unit first, in the middle or last: the loop stops there and the whole text is encoded again.
    if (n > 0) for (const at of new Set([0, n >> 1, n - 1])) texts.push(`${ascii.slice(0, at)}\u00e9${ascii.slice(at + 1)}`);
  }
  texts.push("x".repeat(4096), `${"y".repeat(300)}\u{1f600}`);
  const utf8 = new TextEncoder();

  it("pushBatch and push store each text byte for byte, and read() gives it back", async () => {
    const driver = memoryDriver();
    const q = await QueueWriter.open("q", { driver });
    await q.pushBatch(texts);
    await Promise.all(texts.map((text) => q.push(text)));
    const c = await QueueConsumer.open("q", "c", { driver });
    const raw = await QueueConsumer.open("q", "raw", { driver });
    const got: unknown[] = [];
    const bytes: Uint8Array[] = [];
    for (let batch = await c.read({ max: 1000 }); batch.length > 0; batch = await c.read({ max: 1000 })) got.push(...batch.map((m) => m.data));
    for (let batch = await raw.read({ max: 1000, raw: true }); batch.length > 0; batch = await raw.read({ max: 1000, raw: true }))
      bytes.push(...batch.map((m) => m.data as Uint8Array));
    expect(got).toEqual([...texts, ...texts]);
    expect(bytes.map((b) => Array.from(b))).toEqual([...texts, ...texts].map((text) => Array.from(utf8.encode(text))));
    await Promise.all([c.close(), raw.close(), q.close()]);
  });
});

describe("a consumer keeps nothing of what it handed out", () => {
  it("the messages of its last read are collectable while it stays open", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const driver = memoryDriver();
    const q = await QueueWriter.open("q", { driver });
    await q.pushBatch(Array.from({ length: 10 }, (_, i) => `message ${i}`));
    const c = await QueueConsumer.open("q", "c", { driver });
    // Made in a function of its own: no reference stays on this one's stack.
    const readWeakly = async () => {
      const batch = await c.read({ max: 10 });
      expect(batch).toHaveLength(10);
      return new WeakRef(batch);
    };
    const ref = await readWeakly();
    await new Promise((resolve) => setImmediate(resolve)); // a WeakRef's target is held until the job that made it ends
    gc();
    expect(ref.deref()).toBeUndefined();
    await c.close();
    await q.close();
  });
});
