/**
 * The fencing scenarios every driver with leases must pass (redis, fs with `lockLeaseMs`): a
 * holder in another process (fence-child.ts, blind to its own loss) is SIGSTOPped past its
 * lease, a new holder takes over here, and the resumed one is refused by the driver's fence.
 */
import { resolve } from "pathe";
import { expect } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import type { Message } from "../../src/format/message";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { startScript, type Child } from "./spawn";
import { sleep } from "./sleep";

const FENCE_CHILD = resolve(import.meta.dirname, "fence-child.ts");

/** Every message of `queue` from the start, through a fresh consumer, with the problems reading reported. */
export async function readAll(driver: QueueDriver, queue: string) {
  const problems: QueueProblem[] = [];
  const c = await QueueConsumer.open(queue, `check-${Date.now()}`, { driver, onProblem: (p) => problems.push(p) });
  const all: Message[] = [];
  for (let got = await c.read({ max: 1000 }); got.length > 0; got = await c.read({ max: 1000 })) all.push(...got);
  await c.close();
  return { all, problems };
}

/** fence-child.ts's `<url> <prefix> <leaseMs>` for the storage under test. */
export type ChildStorage = [url: string, prefix: string, leaseMs: string];

/**
 * Where a paused holder keeps others out for the pause (the fs driver's write mutex: a holder
 * stopped inside it delays a takeover until it runs again): true while the child is there.
 */
export type InsideWrite = () => boolean;

/**
 * SIGSTOPs `child` at a moment it is not inside a write (`insideWrite`), resuming and stopping
 * it again until then: stopped right after printing a line, a child in a tight loop is often at
 * the same step of the next round.
 */
async function pauseOutsideWrites(child: Child, insideWrite: InsideWrite | undefined): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    child.process.kill("SIGSTOP");
    await sleep(5); // the signal is taken
    if (!insideWrite?.() || attempt === 200) return;
    child.process.kill("SIGCONT");
    await sleep(Math.random() * 3);
  }
}

/**
 * A writer in a child pushes `old-<i>`; paused past `leaseMs`, a writer here (same part, no
 * roll) pushes `new-0..30`: the child's next push is `E_FENCED`, and the queue reads every
 * `old-` it acknowledged, then exactly the `new-` ones, every CRC good.
 */
export async function expectStaleWriterFenced(storage: ChildStorage, driver: QueueDriver, leaseMs: number, insideWrite?: InsideWrite): Promise<void> {
  const child = startScript(FENCE_CHILD, "writer", ...storage);
  try {
    await child.waitFor((l) => l === "ack 20");
    await pauseOutsideWrites(child, insideWrite);
    await sleep(leaseMs + 300); // the lease runs out; the child cannot renew it
    // The same part, from where the paused writer stopped: only the fence keeps it from writing over these.
    const q = await QueueWriter.open("fq", { driver, durability: "fsync", rollOnOpen: false });
    for (let i = 0; i < 30; i++) await q.push(`new-${i}`);
    child.process.kill("SIGCONT");
    expect(await child.waitFor((l) => l.startsWith("err "))).toBe("err E_FENCED");
    await q.push("new-30");
    await q.close();
    const acked = child.lines.filter((l) => l.startsWith("ack ")).map((l) => `old-${l.slice(4)}`);
    const { all, problems } = await readAll(driver, "fq");
    expect(problems).toEqual([]); // every record's CRC is good
    const data = all.map((m) => m.data as string);
    // Sequence numbers continuous within each part.
    for (let i = 1; i < all.length; i++) if (all[i]!.part === all[i - 1]!.part) expect(all[i]!.seq).toBe(all[i - 1]!.seq + 1);
    const firstNew = data.indexOf("new-0");
    expect(data.slice(firstNew)).toEqual(Array.from({ length: 31 }, (_, i) => `new-${i}`));
    expect(data.slice(0, firstNew)).toEqual(Array.from({ length: firstNew }, (_, i) => `old-${i}`));
    for (const d of acked) expect(data.slice(0, firstNew)).toContain(d);
  } finally {
    child.process.kill("SIGKILL");
    await child.exited;
  }
}

/**
 * A consumer in a child commits one message at a time; paused past `leaseMs`, a consumer here
 * reads and commits 50: the child's next commit is `E_FENCED`, and the saved position is ours.
 */
export async function expectStaleConsumerFenced(storage: ChildStorage, driver: QueueDriver, leaseMs: number, insideWrite?: InsideWrite): Promise<void> {
  const q = await QueueWriter.open("cq", { driver, durability: "none" });
  await q.pushBatch(Array.from({ length: 200 }, (_, i) => `m${i}`));
  await q.close();
  const child = startScript(FENCE_CHILD, "consumer", ...storage);
  try {
    await child.waitFor((l) => l === "commit 10");
    await pauseOutsideWrites(child, insideWrite);
    await sleep(leaseMs + 300);
    const c = await QueueConsumer.open("cq", "c", { driver, syncCommits: true });
    const got = await c.read({ max: 50 });
    await c.commit();
    const last = got.at(-1)!.seq;
    expect(last).toBeGreaterThanOrEqual(60);
    child.process.kill("SIGCONT");
    expect(await child.waitFor((l) => l.startsWith("err "))).toBe("err E_FENCED");
    await c.close();
    const again = await QueueConsumer.open("cq", "c", { driver });
    expect((await again.read({ max: 1 }))[0]!.seq).toBe(last + 1);
    await again.close();
  } finally {
    child.process.kill("SIGKILL");
    await child.exited;
  }
}
