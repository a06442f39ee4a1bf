import { describe, expect, it } from "vitest";
import { faulty } from "../helpers/faulty-driver";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { SharedState, messageKey, startsBelow } from "../../src/consumers/state/shared-state";
import { QueueWriter } from "../../src/writer/writer";
import type { QueueDriver } from "../../src/core/driver";

let failing = false;
const driverFor = (name: string): QueueDriver =>
  faulty(`${name}-${Math.random()}`, (step, path) => failing && step === "append" && path.includes("_info_shlog_"), false, false);

/** What a restart (after a crash) would load: each message's count of deliveries. */
async function countsOnDisk(driver: QueueDriver, keys: { part: number; offset: number }[]): Promise<number[]> {
  const loaded = await new SharedState(driver, "q", "s", false).load(() => {});
  return keys.map(({ part, offset }) => loaded.deliveries.get(messageKey(part, offset)) ?? (startsBelow(part, offset, loaded.mark) ? 1 : 0));
}

async function produce(driver: QueueDriver, items: [string, string | undefined][]) {
  const q = await QueueWriter.open("q", { driver, durability: "none" });
  for (const [body, group] of items) await q.produce([body], group === undefined ? {} : { group });
  await q.close();
}

describe("review: the mark passing waiting messages (D;...;0)", () => {
  it("a failed journal write of a take loses its zeros: a later mark must not count the passed message", async () => {
    failing = false;
    const driver = driverFor("mark-fail");
    await produce(driver, [
      ["a1", "a"],
      ["a2", "a"],
      ["b1", "b"],
      ["c1", undefined],
    ]);
    const c = await SharedConsumer.open("q", "s", { driver, syncCommits: false, leaseMs: 60_000 });
    // a1 and b1 go out; a2 waits for a1: the mark passes it with a count of 0 — in a write that fails.
    failing = true;
    await expect(c.poll({ max: 2 })).rejects.toThrow();
    failing = false;
    // The next take hands out c1: its mark is above a2.
    const got = await c.poll({ max: 10, timeoutMs: 0 });
    expect(got.map((m) => m.data)).toEqual(["c1"]);
    // a2 was never handed out: what a crash now would load must say 0, not 1 (the mark after c1).
    const all = await SharedConsumer.open("q", "t", { driver, syncCommits: false, groupConcurrency: 10 });
    const a2 = (await all.poll({ max: 10 })).find((m) => m.data === "a2")!;
    await all.close();
    expect(await countsOnDisk(driver, [a2])).toEqual([0]);
    await c.close();
  });
});
