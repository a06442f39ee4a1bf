import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { expectEndedByTimeout, expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";

describe("consumer.poll: read, then wait for the first message", () => {
  it("answers at once with what is there, waits for the next push, and gives [] on timeout or abort", async () => {
    const driver = memoryDriver();
    const q = await QueueWriter.open("q", { driver });
    await q.push("there");
    const c = await QueueConsumer.open("q", "c", { driver });
    expect((await c.poll({ timeoutMs: 5000 })).map((m) => m.data)).toEqual(["there"]);

    let started = performance.now();
    expect(await c.poll({ timeoutMs: 50 })).toEqual([]);
    expectEndedByTimeout(started, 50);

    const abort = new AbortController();
    setTimeout(() => abort.abort(), 30);
    expect(await c.poll({ signal: abort.signal })).toEqual([]);

    started = performance.now();
    setTimeout(() => void q.push("later"), 30);
    expect((await c.poll({ timeoutMs: WAKE_TIMEOUT_MS })).map((m) => m.data)).toEqual(["later"]);
    expectEndedEarly(started);
    await c.close();
    await q.close();
  });
});
