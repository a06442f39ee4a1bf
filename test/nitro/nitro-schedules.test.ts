// The Nitro module's `schedules`: set when the instance opens (the instance set up directly in
// Node, as the module's plugin does), fired by it; bad ones refused at build and at run time.
import { afterEach, describe, expect, it } from "vitest";
import vQueue, { setupVQueue } from "../../adapters/nitro";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-nitro-schedules-");
const instances: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const instance of instances.splice(0)) await instance.close();
});

describe("the Nitro module's schedules", () => {
  it("are set when the instance opens, listed and fired; useVQueue() sets and removes more", async () => {
    const vq = setupVQueue("schedules-open", {
      dir: tempDir(),
      durability: "none",
      schedules: { beat: { queue: "jobs", everyMs: 200, message: { job: "beat" } }, nightly: { queue: "jobs", cron: "0 3 * * *", tz: "Europe/Paris" } },
    });
    instances.push(vq);
    await vq.handler;
    expect((await vq.schedules("jobs")).map((s) => [s.name, s.cron ?? s.everyMs])).toEqual([
      ["beat", 200],
      ["nightly", "0 3 * * *"],
    ]);
    const c = vq.shared("jobs", "w");
    const got = await c.poll({ max: 10, timeoutMs: 5000 });
    expect(got.map((m) => m.data)).toContain('{"job":"beat"}');
    expect((await vq.schedule("jobs", "hourly", { cron: "0 * * * *" })).created).toBe(true);
    expect(await vq.unschedule("jobs", "hourly")).toBe(true);
    expect(await vq.unschedule("jobs", "hourly")).toBe(false);
  });

  it("on a partitioned queue: set when the instance opens, listed, fired into its partitions", async () => {
    const vq = setupVQueue("schedules-partitioned", {
      dir: tempDir(),
      durability: "none",
      queues: { events: { partitions: 3 } } as never,
      schedules: { beat: { queue: "events", everyMs: 200 } },
    });
    instances.push(vq);
    await vq.handler;
    expect((await vq.schedules("events")).map((s) => s.name)).toEqual(["beat"]);
    const c = vq.shared("events", "w");
    const ticks = new Set<number>();
    const partitions = new Set<number>();
    for (const deadline = Date.now() + 10_000; ticks.size < 6 && Date.now() < deadline;) {
      for (const m of await c.poll({ max: 10, timeoutMs: 1000 })) {
        ticks.add((JSON.parse(m.data as string) as { tick: number }).tick);
        partitions.add((m as { partition?: number }).partition!);
        await c.ack(m);
      }
    }
    expect(ticks.size).toBeGreaterThanOrEqual(6);
    expect(partitions.size).toBeGreaterThan(1);
  });

  it("bad ones are refused at build and at run time, saying what is allowed", () => {
    expect(() => vQueue({ schedules: { x: { queue: "jobs", cron: "61 * * * *" } } })).toThrow(/schedules\.x: Invalid cron "61 \* \* \* \*"/);
    expect(() => vQueue({ schedules: { x: { everyMs: 1000 } as never } })).toThrow("Missing schedules.x.queue.");
    expect(() => setupVQueue("schedules-bad", { storage: "memory:", schedules: '{"x":{"queue":"jobs","everyMs":5}}' as never })).toThrow(
      /schedules\.x: Invalid everyMs 5/,
    );
  });
});
