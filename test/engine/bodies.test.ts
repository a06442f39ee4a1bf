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
