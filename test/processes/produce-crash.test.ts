import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";
import { startChild } from "../helpers/spawn";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-produce-crash-");
const quiet = { onProblem: () => {} };

/** Every message of the queue, read by a fresh consumer. */
async function readAll(dir: string, queue: string, name: string): Promise<string[]> {
  const c = await QueueConsumer.open(queue, name, { driver: fsDriver({ dir }), ...quiet });
  const out: string[] = [];
  for (let batch = await c.read({ max: 1000 }); batch.length > 0; batch = await c.read({ max: 1000 })) out.push(...batch.map((m) => m.data as string));
  await c.close();
  return out;
}

describe("delayed messages across a SIGKILL of the writer's process", () => {
  it("do not come early and do come, once, from the next writer", async () => {
    const dir = await freshDir();
    const child = startChild("delay-pusher", dir, "dq", "40", "1500");
    await child.waitFor((line) => line === "done");
    const until = new Map<string, number>(
      child.lines.filter((l) => l.startsWith("ack ")).map((l) => [`d${l.split(" ")[1]}`, Number(l.split(" ")[2])] as const),
    );
    expect(until.size).toBe(40);
    child.process.kill("SIGKILL");
    await child.exited;
    // The next writer, in this process: each message arrives no earlier than its due time.
    const writer = await QueueWriter.open("dq", { driver: fsDriver({ dir }), ...quiet });
    const c = await QueueConsumer.open("dq", "c", { driver: fsDriver({ dir }), ...quiet });
    const arrived = new Map<string, number>();
    const deadline = Date.now() + 15_000;
    while (arrived.size < 40 && Date.now() < deadline) {
      await c.wait({ timeoutMs: 1000 });
      for (const m of await c.read({ max: 100 })) {
        expect(arrived.has(m.data as string), m.data as string).toBe(false);
        arrived.set(m.data as string, Date.now());
      }
      await c.commit();
    }
    for (const [body, at] of arrived) expect(at, body).toBeGreaterThanOrEqual(until.get(body)!);
    expect([...arrived.keys()].sort()).toEqual([...until.keys()].sort());
    expect(await c.wait({ timeoutMs: 300 })).toBe(false);
    await c.close();
    await writer.close();
  }, 60_000);

  it("killed while it moves due messages into the queue: the next writer delivers each exactly once", async () => {
    const dir = await freshDir();
    for (let run = 0; run < 3; run++) {
      const child = startChild("delay-pusher", dir, `mq${run}`, "300", "300");
      await child.waitFor((line) => line === "done", 30_000);
      // 300 messages due 5 ms apart from 300 ms after each ack: kill it in the middle of moving them.
      await sleep(400 + run * 300);
      child.process.kill("SIGKILL");
      await child.exited;
      const writer = await QueueWriter.open(`mq${run}`, { driver: fsDriver({ dir }), ...quiet });
      // The last is due about 1.8 s after the ack; a loaded machine may move them later still.
      await sleep(2500);
      for (const deadline = Date.now() + 20_000; (await readAll(dir, `mq${run}`, "peek")).length < 300 && Date.now() < deadline;) await sleep(100);
      await writer.close();
      const got = await readAll(dir, `mq${run}`, "c");
      expect(got.length, `run ${run}`).toBe(300);
      expect(new Set(got).size).toBe(300);
    }
  }, 90_000);
});

describe("idempotent produce across a SIGKILL of the writer's process", () => {
  it("a retry of every key, acknowledged or not, writes each key exactly once", async () => {
    const dir = await freshDir();
    const child = startChild("keyed-pusher", dir, "kq", "8");
    await child.waitFor((line) => line === "ready");
    await child.waitFor((line) => line === "ack 300", 30_000);
    child.process.kill("SIGKILL");
    await child.exited;
    const acked = child.lines.filter((l) => l.startsWith("ack ")).map((l) => Number(l.slice(4)));
    const highest = Math.max(...acked);
    // The client side: it retries every produce it sent, answered or not (the 8 in flight at the kill too).
    const writer = await QueueWriter.open("kq", { driver: fsDriver({ dir }), ...quiet });
    const results = await Promise.all(Array.from({ length: highest + 20 }, (_, i) => writer.produce([`k${i}`], { key: `key-${i}` })));
    for (const i of acked) expect(results[i]!.replayed, `key-${i}`).toBe(true);
    await writer.close();
    const got = await readAll(dir, "kq", "c");
    const counts = new Map<string, number>();
    for (const body of got) counts.set(body, (counts.get(body) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(counts.size).toBe(highest + 20);
  }, 60_000);
});
