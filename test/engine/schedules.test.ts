/**
 * Schedules (src/writer/schedules.ts) on real files: set, listed and removed by name; fired by the
 * writer each tick; one firing for the ticks missed while no writer was open; none by a writer
 * whose lock was taken over (its writes fenced).
 */
import { readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import type { QueueDriver } from "../../src/core/driver";
import { browseMessages } from "../../src/inspect/browse";
import { openQueue } from "../../src/writer/writer";
import { readSchedules } from "../../src/writer/schedules";
import { encodeFrames, readFrames } from "../../src/storage/side-log";
import { sleep } from "../helpers/sleep";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-schedules-");
const quiet = { onProblem: () => {} };

/** Every message of queue `q`, as text. */
async function texts(driver: QueueDriver, queue = "q"): Promise<string[]> {
  const page = await browseMessages(driver, queue, { from: "earliest", limit: 1000, ...quiet }).catch(() => ({ messages: [] }));
  return page.messages.map((m) => String(m.data));
}

/** The ticks of the default firings (`{ schedule, tick, at }`) of schedule `name`. */
async function ticks(driver: QueueDriver, name: string): Promise<number[]> {
  return (await texts(driver))
    .filter((t) => t.startsWith("{"))
    .map((t) => JSON.parse(t) as { schedule: string; tick: number })
    .filter((m) => m.schedule === name)
    .map((m) => m.tick);
}

describe("schedules", () => {
  it("are set, updated, listed and removed by name; bad ones are refused saying what is allowed", async () => {
    const driver = fsDriver({ dir: tempDir() });
    const writer = await openQueue("q", { driver, ...quiet });
    const set = await writer.schedule("nightly", { cron: "0 3 * * *", tz: "Europe/Paris", message: { job: "report" } });
    expect(set.created).toBe(true);
    expect(set.schedule).toMatchObject({ name: "nightly", cron: "0 3 * * *", tz: "Europe/Paris", message: '{"job":"report"}' });
    // 03:00 in Paris is 01:00 or 02:00 UTC.
    expect([1, 2]).toContain(new Date(set.schedule.nextAt!).getUTCHours());
    expect((await writer.schedule("often", { everyMs: 60_000 })).created).toBe(true);
    const updated = await writer.schedule("nightly", { cron: "30 4 * * *", tz: "UTC" });
    expect(updated.created).toBe(false);
    expect(writer.schedules().map((s) => [s.name, s.cron ?? s.everyMs])).toEqual([
      ["nightly", "30 4 * * *"],
      ["often", 60_000],
    ]);
    await expect(writer.schedule("x", { cron: "61 * * * *" })).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("Invalid cron") });
    await expect(writer.schedule("x", { cron: "* * * * *", tz: "Mars/Olympus" })).rejects.toMatchObject({
      code: "E_OPTION",
      message: expect.stringContaining("IANA time zone"),
    });
    await expect(writer.schedule("x", { cron: "* * * * *", everyMs: 1000 })).rejects.toMatchObject({
      code: "E_OPTION",
      message: expect.stringContaining("exactly one of cron and everyMs"),
    });
    await expect(writer.schedule("x", { everyMs: 5 })).rejects.toMatchObject({ code: "E_OPTION", message: expect.stringContaining("from 100") });
    await expect(writer.schedule("a/b", { everyMs: 1000 })).rejects.toMatchObject({ code: "E_NAME" });
    expect(await writer.unschedule("often")).toBe(true);
    expect(await writer.unschedule("often")).toBe(false);
    await writer.close();
    // Kept on storage: the next writer has them.
    const again = await openQueue("q", { driver, ...quiet });
    expect(again.schedules().map((s) => s.name)).toEqual(["nightly"]);
    await again.close();
  });

  it("fire every 200 ms, each tick once, with the given message", async () => {
    const driver = fsDriver({ dir: tempDir() });
    const writer = await openQueue("q", { driver, ...quiet });
    await writer.schedule("tick", { everyMs: 200 });
    await writer.schedule("hello", { everyMs: 200, message: "hello" });
    await sleep(1300);
    await writer.close();
    const fired = await ticks(driver, "tick");
    expect(fired.length).toBeGreaterThanOrEqual(3);
    // One firing a tick, in order, 200 ms apart (none skipped while the writer was open).
    for (let i = 1; i < fired.length; i++) expect(fired[i]! - fired[i - 1]!).toBe(200);
    expect((await texts(driver)).filter((t) => t === "hello").length).toBeGreaterThanOrEqual(3);
    const last = (await openQueue("q", { driver, ...quiet })).schedules().find((s) => s.name === "tick")!;
    expect(last.lastFiredAt).toBe(fired.at(-1));
  });

  it("after a downtime, fire once for the ticks missed, then go on each tick", async () => {
    const driver = fsDriver({ dir: tempDir() });
    const writer = await openQueue("q", { driver, ...quiet });
    await writer.schedule("tick", { everyMs: 200 });
    await sleep(500);
    await writer.close();
    const before = await ticks(driver, "tick");
    // Five ticks or more pass with no writer open.
    await sleep(1200);
    const reopenedAt = Date.now();
    const again = await openQueue("q", { driver, ...quiet });
    const atOpen = await ticks(driver, "tick");
    expect(atOpen.length).toBe(before.length + 1);
    // The latest missed tick, not the first.
    expect(atOpen.at(-1)!).toBeGreaterThan(reopenedAt - 200);
    await sleep(700);
    await again.close();
    const after = await ticks(driver, "tick");
    expect(new Set(after).size).toBe(after.length);
    for (let i = before.length + 1; i < after.length; i++) expect(after[i]! - after[i - 1]!).toBe(200);
    expect(after.length).toBeGreaterThanOrEqual(atOpen.length + 2);
  });

  it("a writer whose lock was taken over fires nothing: its writes are fenced", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir, lockLeaseMs: 1000 });
    const writer = await openQueue("q", { driver, ...quiet });
    let lost = false;
    writer.whenLockLost(() => (lost = true));
    await writer.schedule("tick", { everyMs: 200 });
    await sleep(450);
    // Another instance takes the lock (a newer epoch in its file), as after this one was paused past its lease.
    const file = join(dir, "q_queue.lock");
    const [, start, host, epoch, nonce] = readFileSync(file, "utf8").trim().split(" ");
    writeFileSync(file, `999999 ${start} ${host} ${Number(epoch) + 1} ${nonce}\n`);
    const stale = (await ticks(driver, "tick")).length;
    await sleep(1000);
    expect(await ticks(driver, "tick")).toHaveLength(stale);
    expect(lost).toBe(true);
    await writer.close().catch(() => {});
  });

  it("are listed by any instance, from storage, also while a compaction has cut the file (from its journal)", async () => {
    const dir = tempDir();
    const driver = fsDriver({ dir });
    const writer = await openQueue("q", { driver, ...quiet });
    await writer.schedule("a", { everyMs: 60_000 });
    await writer.schedule("b", { cron: "0 * * * *" });
    expect((await readSchedules(driver, "q")).map((s) => s.name)).toEqual(["a", "b"]);
    await writer.close();
    // A compaction between cutting the file and writing it again: its whole journal (ending in END) holds the content.
    const file = join(dir, "q_info_sched");
    const payloads = readFrames(readFileSync(file)).frames.map((f) => f.payload);
    writeFileSync(`${file}_new`, encodeFrames([...payloads, Uint8Array.of(0, 0x45, 0x4e, 0x44)]));
    truncateSync(file, 0);
    expect((await readSchedules(driver, "q")).map((s) => s.name)).toEqual(["a", "b"]);
    // The next writer finishes the compaction: the same schedules.
    const again = await openQueue("q", { driver, ...quiet });
    expect(again.schedules().map((s) => s.name)).toEqual(["a", "b"]);
    await again.close();
  });
});
