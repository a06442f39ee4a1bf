// Retention's record of deleted parts (src/log/pruned.ts) past its bound: the compaction keeps the
// newest half, and one cut short at any step (a storage failing mid-way, a kill) loses no entry
// of that half, for readers meanwhile and after the next record.
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { prunedPath, sideJournalPath } from "../../src/storage/paths";
import { readPruned, recordPruned, type PrunedPart } from "../../src/log/pruned";
import { faulty, type Step } from "../helpers/faulty-driver";

const MAX = 65_536;
const FILE = prunedPath("q");
const COPY = sideJournalPath(FILE);
const parts = (from: number, count: number): PrunedPart[] => Array.from({ length: count }, (_, i) => ({ part: from + i, messages: 10 + i, bytes: 1000 + i }));
const ids = (map: Map<number, PrunedPart>) => [...map.keys()].sort((a, b) => a - b);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
/** Those of `wanted` not in `got` (expect.arrayContaining is quadratic: too slow for 32,768 ids). */
function absent(got: number[], wanted: number[]): number[] {
  const have = new Set(got);
  return wanted.filter((id) => !have.has(id));
}

async function full(name: string): Promise<void> {
  await recordPruned(memoryDriver({ name }), "q", parts(0, MAX));
}

describe("the pruned record past its bound", () => {
  it("keeps the newest half and the new entries; the copy goes at the next round", async () => {
    const name = `pruned-${Math.random()}`;
    await full(name);
    const driver = memoryDriver({ name });
    await recordPruned(driver, "q", parts(MAX, 2));
    expect(ids(await readPruned(driver, "q"))).toEqual(range(MAX / 2, MAX + 2));
    expect(await driver.readRecord(COPY)).toBeDefined();
    await recordPruned(driver, "q", parts(MAX + 2, 1));
    expect(await driver.readRecord(COPY)).toBeUndefined();
    expect(ids(await readPruned(driver, "q"))).toEqual(range(MAX / 2, MAX + 3));
    expect((await readPruned(driver, "q")).get(MAX + 1)).toEqual({ part: MAX + 1, messages: 11, bytes: 1001 });
  });

  /** Fails the file's first append after it was cut (the copy is whole by then). */
  const afterTheCut = () => {
    let cut = false;
    return (step: Step, path: string) => {
      if (path === FILE && step === "truncate") return !(cut = true);
      return cut && path === FILE && step === "append";
    };
  };
  const cuts: [string, (step: Step, path: string) => boolean, boolean][] = [
    ["the copy torn, before the file was cut", (step, path) => path === COPY && step === "append", true],
    ["the file cut, not written again", afterTheCut(), false],
    ["the file half written again", afterTheCut(), true],
  ];
  it("the copy's removal failing at the next round: nothing lost, the round after removes it", async () => {
    const name = `pruned-remove-${Math.random()}`;
    await full(name);
    await recordPruned(memoryDriver({ name }), "q", parts(MAX, 2));
    await expect(
      recordPruned(
        faulty(name, (step, path) => path === COPY && step === "remove"),
        "q",
        parts(MAX + 2, 1),
      ),
    ).rejects.toThrow(/injected/);
    const driver = memoryDriver({ name });
    expect(absent(ids(await readPruned(driver, "q")), range(MAX / 2, MAX + 2))).toEqual([]);
    await recordPruned(driver, "q", parts(MAX + 3, 1));
    expect(await driver.readRecord(COPY)).toBeUndefined();
    expect(absent(ids(await readPruned(driver, "q")), [...range(MAX / 2, MAX + 2), MAX + 3])).toEqual([]);
  });

  for (const [when, failAt, tear] of cuts) {
    it(`cut short (${when}): readers still see the newest half, and the next record finishes it`, async () => {
      const name = `pruned-cut-${Math.random()}`;
      await full(name);
      await expect(recordPruned(faulty(name, failAt, tear), "q", parts(MAX, 2))).rejects.toThrow(/injected/);
      const driver = memoryDriver({ name });
      // Not one entry of the newest half is lost to a reader (those of the older half may still be there).
      expect(absent(ids(await readPruned(driver, "q")), range(MAX / 2, MAX))).toEqual([]);
      await recordPruned(driver, "q", parts(MAX + 2, 1));
      const after = ids(await readPruned(driver, "q"));
      expect(absent(after, [...range(MAX / 2, MAX), MAX + 2])).toEqual([]);
      expect(after.length).toBeLessThanOrEqual(MAX + 1);
      // The file alone holds them (a copy left is that of a compaction of this round).
      const file = (await driver.readRecord(FILE))!;
      expect(file.length % 32).toBe(0);
      const inFile = Array.from({ length: file.length / 32 }, (_, i) => Number(new DataView(file.buffer, file.byteOffset).getBigUint64(i * 32, true)));
      expect(absent(inFile, [...range(MAX / 2, MAX), MAX + 2])).toEqual([]);
    });
  }
});
