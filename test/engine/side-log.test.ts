// A side file's compaction (src/storage/side-log.ts) cut short at each of its steps, as a storage that
// fails mid-way (a Redis failover) or a kill leaves it: the next open finds every frame that was
// there, never an empty file. The chaos test on a Redis Cluster stored retries twice so before
// (the idempotency file, cut at a writer's open, was never written again).
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/core/driver";
import { sideJournalPath } from "../../src/storage/paths";
import { SideLog, encodeFrames, type Frame } from "../../src/storage/side-log";
import { faulty, injected, type Step } from "../helpers/faulty-driver";

const PATH = "q_info_idem";
const JOURNAL = sideJournalPath(PATH);
const quiet = () => {};
const frame = (text: string) => Uint8Array.of(1, ...new TextEncoder().encode(text));
const texts = (frames: Frame[]) => frames.map((f) => new TextDecoder().decode(f.payload.subarray(1)));

/** A side file of frames a, b, c on store `name`. */
async function seed(name: string): Promise<void> {
  const { log } = await SideLog.open(memoryDriver({ name }), PATH, "q", quiet);
  await log.append([frame("a"), frame("b"), frame("c")], false);
  await log.close();
}

async function reopen(name: string): Promise<{ frames: string[]; journal: boolean; log: SideLog }> {
  const driver = memoryDriver({ name });
  const { log, frames } = await SideLog.open(driver, PATH, "q", quiet);
  return { frames: texts(frames), journal: (await driver.readRecord(JOURNAL)) !== undefined, log };
}

describe("a side file's compaction cut short", () => {
  it("after the file was cut: the next open writes the journal's copy to it", async () => {
    const name = `side-cut-${Math.random()}`;
    await seed(name);
    let cut = false;
    const driver = faulty(name, (step, path) => {
      if (path === PATH && step === "truncate") cut = true;
      return cut && path === PATH && step === "append";
    });
    const { log } = await SideLog.open(driver, PATH, "q", quiet);
    await expect(log.rewrite([frame("b"), frame("c")], false)).rejects.toThrow(/injected/);
    // Nothing more goes to a file left cut: it waits for the next open.
    await expect(log.append([frame("d")], false)).rejects.toThrow(/compaction failed.*reopen/);
    expect(await (await memoryDriver({ name }).openLog(PATH, { create: false }))!.size()).toBe(0);
    const again = await reopen(name);
    expect(again).toMatchObject({ frames: ["b", "c"], journal: false });
    // And it goes on from there.
    await again.log.append([frame("d")], false);
    expect((await reopen(name)).frames).toEqual(["b", "c", "d"]);
  });

  it("a rewrite to nothing cut short after its journal (before the cut, or before the journal went): the next open finishes it", async () => {
    for (const failAt of [
      (step: Step, path: string) => path === PATH && step === "truncate",
      (step: Step, path: string) => path === JOURNAL && step === "remove",
    ]) {
      const name = `side-empty-${Math.random()}`;
      await seed(name);
      const { log } = await SideLog.open(faulty(name, failAt), PATH, "q", quiet);
      await expect(log.rewrite([], false)).rejects.toThrow(/injected/);
      expect(await memoryDriver({ name }).readRecord(JOURNAL)).toBeDefined();
      expect(await reopen(name)).toMatchObject({ frames: [], journal: false });
    }
  });

  it("a rewrite to nothing, cut when the cut had taken only the file's last frame (unstorage cuts chunk by chunk): stays nothing", async () => {
    const name = `side-partial-${Math.random()}`;
    await seed(name);
    const inner = memoryDriver({ name });
    const driver: QueueDriver = {
      ...faulty(name, () => false),
      async openLog(path, options) {
        const log = await inner.openLog(path, options);
        if (!log || path !== PATH) return log;
        return {
          ...log,
          async truncate(length, fence) {
            if (length !== 0) return log.truncate(length, fence);
            await log.truncate((await log.size()) - encodeFrames([frame("c")]).length, fence);
            throw injected();
          },
        };
      },
    };
    const { log } = await SideLog.open(driver, PATH, "q", quiet);
    await expect(log.rewrite([], false)).rejects.toThrow(/injected/);
    // The file now holds a, b: a prefix of what was there, not the compaction's copy.
    expect(await reopen(name)).toMatchObject({ frames: [], journal: false });
  });

  it("while the journal was written (half of it): the file was not touched, the journal goes", async () => {
    const name = `side-torn-${Math.random()}`;
    await seed(name);
    const { log } = await SideLog.open(
      faulty(name, (step, path) => path === JOURNAL && step === "append", true),
      PATH,
      "q",
      quiet,
    );
    await expect(log.rewrite([frame("c")], false)).rejects.toThrow(/injected/);
    expect(await memoryDriver({ name }).readRecord(JOURNAL)).toBeDefined();
    expect(await reopen(name)).toMatchObject({ frames: ["a", "b", "c"], journal: false });
  });

  it("when only the journal's removal failed: the file is kept as it is, with what was appended after", async () => {
    const name = `side-remove-${Math.random()}`;
    await seed(name);
    const { log } = await SideLog.open(
      faulty(name, (step, path) => path === JOURNAL && step === "remove"),
      PATH,
      "q",
      quiet,
    );
    await expect(log.rewrite([frame("b")], false)).rejects.toThrow(/injected/);
    // What another holder could have appended since (the journal still there).
    const file = (await memoryDriver({ name }).openLog(PATH, { create: false }))!;
    await file.append(await file.size(), encodeFrames([frame("d")]));
    expect(await reopen(name)).toMatchObject({ frames: ["b", "d"], journal: false });
  });

  it("a whole compaction leaves no journal, and its file reads back", async () => {
    const name = `side-whole-${Math.random()}`;
    await seed(name);
    const { log } = await SideLog.open(memoryDriver({ name }), PATH, "q", quiet);
    // Each payload's new start, after the compaction's BEGIN frame (20 bytes).
    expect(await log.rewrite([frame("c"), frame("a")], false)).toEqual([24, 34]);
    await log.append([frame("e")], false);
    expect(await reopen(name)).toMatchObject({ frames: ["c", "a", "e"], journal: false });
  });
});
