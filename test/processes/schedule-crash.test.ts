/**
 * A schedule's firing across a SIGKILL of its writer's process between the firing's push and its
 * FIRED frame: the next writer, opened within the same tick, does not fire that tick again (its
 * idempotency key tells it was fired), and goes on with the next ones.
 */
import { resolve } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { browseMessages } from "../../src/inspect/browse";
import { openQueue } from "../../src/writer/writer";
import { sleep } from "../helpers/sleep";
import { startScript } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-schedule-crash-");
/** Long enough that the next writer opens within the tick that was fired, on a loaded machine too. */
const EVERY_MS = 4000;

async function ticks(dir: string): Promise<number[]> {
  const page = await browseMessages(fsDriver({ dir }), "q", { from: "earliest", limit: 100, onProblem: () => {} });
  return page.messages.map((m) => (JSON.parse(String(m.data)) as { tick: number }).tick);
}

describe("a schedule across a SIGKILL between a firing and its FIRED frame", () => {
  it("the next writer does not fire that tick again, and fires the next", async () => {
    const dir = freshDir();
    const child = startScript(resolve(import.meta.dirname, "_schedule-crasher.ts"), dir, String(EVERY_MS));
    await child.waitFor((line) => line === "set");
    await child.exited;
    const fired = await ticks(dir);
    expect(fired).toHaveLength(1);
    const writer = await openQueue("q", { driver: fsDriver({ dir }), onProblem: () => {} });
    // Opened within the tick fired: that tick is the latest due, and is not fired again.
    expect(Date.now()).toBeLessThan(fired[0]! + EVERY_MS);
    expect(writer.schedules()[0]!.lastFiredAt).toBe(fired[0]);
    expect(await ticks(dir)).toEqual(fired);
    await sleep(fired[0]! + EVERY_MS + 500 - Date.now());
    await writer.close();
    expect(await ticks(dir)).toEqual([fired[0], fired[0]! + EVERY_MS]);
  }, 30_000);
});
