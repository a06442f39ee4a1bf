import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";
import { startChild } from "../helpers/spawn";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-shared-crash-");
const COUNT = 3000;

describe("a shared consumer's process killed with SIGKILL", () => {
  it("hands out again every message not acknowledged, and never one whose ack resolved", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("jobs", { driver, durability: "none" });
    await q.pushBatch(Array.from({ length: COUNT }, (_, i) => `j${i}`));
    await q.close();
    const acked = new Set<string>();
    const delivered = new Set<string>();
    /** Hand-outs each message was seen in (printed by a child before it was killed). */
    const seen = new Map<string, number>();
    for (let run = 0; run < 4; run++) {
      const child = startChild("shared-worker", dir, "jobs", "w");
      await child.waitFor((line) => line === "ready");
      // The first run is killed early (maybe before any ack), the others at moments after their first ack.
      if (run > 0) await child.waitFor((line) => line.startsWith("ack "));
      await sleep(20 + run * 40);
      child.process.kill("SIGKILL");
      await child.exited;
      for (const line of child.lines) {
        // A message acknowledged in an earlier run never comes again.
        if (line.startsWith("got ")) expect(acked.has(line.slice(4)), line).toBe(false);
      }
      for (const line of child.lines) if (line.startsWith("ack ")) acked.add(line.slice(4));
      for (const line of child.lines) if (line.startsWith("got ")) delivered.add(line.slice(4));
      for (const line of child.lines) if (line.startsWith("got ")) seen.set(line.slice(4), (seen.get(line.slice(4)) ?? 0) + 1);
    }
    expect(acked.size).toBeGreaterThan(0);
    const shared = await SharedConsumer.open("jobs", "w", { driver, onProblem: () => {} });
    const rest: string[] = [];
    const forgotten: string[] = [];
    for (let batch = await shared.poll({ max: 500, timeoutMs: 0 }); batch.length > 0; batch = await shared.poll({ max: 500, timeoutMs: 0 })) {
      for (const m of batch) {
        rest.push(m.data as string);
        // A crash never forgets a delivery: each hand-out a child printed was counted before it went out
        // (first hand-outs by the high-water mark line, later ones by their own line).
        if (m.deliveries < (seen.get(m.data as string) ?? 0) + 1) forgotten.push(`${m.data as string}: ${m.deliveries}`);
        await shared.ack(m);
      }
    }
    expect(forgotten).toEqual([]);
    expect(rest.some((body) => seen.has(body))).toBe(true);
    expect(rest.filter((body) => acked.has(body))).toEqual([]);
    expect(new Set(rest).size).toBe(rest.length);
    // None lost: what is not handed out now was handed out before (acked, the last "ack" line maybe cut by the kill).
    expect(new Set([...delivered, ...rest]).size).toBe(COUNT);
    // The children never ack every third message (seq % 3 === 0): each of those comes again.
    const neverAcked = Array.from({ length: COUNT }, (_, i) => `j${i}`).filter((_, i) => (i + 1) % 3 === 0);
    expect(neverAcked.filter((body) => !rest.includes(body))).toEqual([]);
    expect(shared.floor.count).toBe(COUNT);
    await shared.close();
  }, 60_000);

  it("is served by one process: another gets E_LOCKED while it runs", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    await (await QueueWriter.open("jobs", { driver, durability: "none" })).close();
    const child = startChild("hold-shared", dir, "jobs", "w");
    try {
      await child.waitFor((line) => line === "ready");
      await expect(SharedConsumer.open("jobs", "w", { driver })).rejects.toMatchObject({ code: "E_LOCKED" });
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
    await (await SharedConsumer.open("jobs", "w", { driver })).close();
  }, 30_000);
});
