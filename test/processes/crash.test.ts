import { crc32 } from "node:zlib";
import { open } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueProblem } from "../../src/core/errors";
import type { Message } from "../../src/format/message";
import { startChild } from "../helpers/spawn";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const RUNS = 12;
const tempDir = useTempDirs("vq-crash-");

/** Re-checks a delivered message against the raw bytes on disk, independently of the reader. */
async function crcOnDisk(dir: string, message: Message): Promise<boolean> {
  const file = await open(join(dir, `crash-${message.part}`, "crash_queue"), "r");
  try {
    const record = Buffer.alloc(25 + message.size);
    await file.read(record, 0, record.length, message.offset);
    const stored = record.readUInt32LE(21);
    record.writeUInt32LE(0, 21);
    return crc32(record.subarray(25), crc32(record.subarray(0, 25))) === stored;
  } finally {
    await file.close();
  }
}

describe("a writer killed with SIGKILL at random moments", () => {
  it(`loses no acknowledged message and never delivers a bad record (${RUNS} kills)`, async () => {
    const dir = tempDir();
    const acked = new Map<number, Set<number>>();
    const problems: QueueProblem[] = [];
    for (let run = 0; run < RUNS; run++) {
      // Small parts, so that kills also land during part roll-overs.
      const child = startChild("pusher", dir, String(run), "4", String(4096 + run * 512));
      await child.waitFor((line) => line.startsWith("ack"));
      await sleep(20 + Math.random() * 200);
      child.process.kill("SIGKILL");
      await child.exited;
      acked.set(run, new Set(child.lines.filter((l) => l.startsWith("ack ")).map((l) => Number(l.slice(4)))));

      // After each kill: everything acknowledged so far is there, in order, exactly once.
      const reader = await QueueConsumer.open("crash", `check${run}`, { driver: fsDriver({ dir }), onProblem: (p) => problems.push(p) });
      const delivered: Message[] = [];
      for (let batch = await reader.read({ max: 5000 }); batch.length > 0; batch = await reader.read({ max: 5000 })) delivered.push(...batch);
      await reader.close();
      const seen = new Map<number, number[]>();
      for (const message of delivered) {
        const [r, i] = (message.data as string).split("-").map(Number) as [number, number];
        const list = seen.get(r) ?? [];
        list.push(i);
        seen.set(r, list);
      }
      for (let r = 0; r <= run; r++) {
        const ids = seen.get(r) ?? [];
        // In push order, no duplicates (ids are taken in call order by the pushers).
        expect(
          ids.every((id, k) => k === 0 || id > ids[k - 1]!),
          `run ${r} in order`,
        ).toBe(true);
        const present = new Set(ids);
        const missing = [...acked.get(r)!].filter((id) => !present.has(id));
        expect(missing, `run ${r}: acknowledged but missing`).toEqual([]);
      }
      // Spot-check crcs against the raw file, independently of the reader.
      for (const message of delivered.filter((_, k) => k % 97 === 0 || k === delivered.length - 1)) {
        expect(await crcOnDisk(dir, message)).toBe(true);
      }
    }
    expect([...acked.values()].every((set) => set.size > 0)).toBe(true);
    // A reader never reports damage inside the known edge: torn tails are beyond it.
    expect(problems.filter((p) => p.code === "BAD_RECORD")).toEqual([]);
  }, 180_000);
});
