import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";

const texts = (messages: { data: unknown }[]) => messages.map((m) => m.data);

describe("consumer.seek", () => {
  it("moves to the oldest message, the end, a cursor, or a message by part and sequence, and saves it", async () => {
    const driver = memoryDriver();
    let q = await QueueWriter.open("q", { driver });
    await q.pushBatch(["a", "b", "c"]);
    await q.close();
    q = await QueueWriter.open("q", { driver }); // part 1
    await q.pushBatch(["d", "e"]);
    const c = await QueueConsumer.open("q", "c", { driver });
    const all = await c.read({ max: 100 });
    expect(texts(all)).toEqual(["a", "b", "c", "d", "e"]);
    await c.commit();

    await c.seek("earliest");
    expect(texts(await c.read({ max: 2 }))).toEqual(["a", "b"]);
    await c.seek({ part: 1, seq: 2 });
    expect(texts(await c.read())).toEqual(["e"]);
    await c.seek(`0.${all[1]!.offset + 25 + all[1]!.size}.2`); // the cursor after "b"
    expect(texts(await c.read({ max: 1 }))).toEqual(["c"]);
    await c.seek("latest");
    expect(await c.read()).toEqual([]);
    await q.push("f");
    expect(texts(await c.read())).toEqual(["f"]);

    // Saved: a reopened consumer resumes at the last seek, backwards included.
    await c.seek({ part: 0, seq: 3 });
    await c.close();
    const again = await QueueConsumer.open("q", "c", { driver });
    expect(texts(await again.read({ max: 100 }))).toEqual(["c", "d", "e", "f"]);

    for (const bad of ["9.0.0", "0.3.1", { part: 0, seq: 9 }, { part: 5, seq: 1 }, { part: -1, seq: 1 }] as const) {
      await expect(again.seek(bad), JSON.stringify(bad)).rejects.toMatchObject({ code: "E_CURSOR" });
    }
    await again.close();
    await q.close();
  });
});
