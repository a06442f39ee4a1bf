import { createStorage } from "unstorage";
import unstorageFs from "unstorage/drivers/fs";
import { describe, expect, it } from "vitest";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { listParts } from "../../src/log/recovery";
import { useTempDirs } from "../helpers/tmp";
import { startChild } from "../helpers/spawn";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-locks-");

describe("a lost lock stops its holder at once", () => {
  it("a writer whose lease another holder took rejects every push from then on, and writes nothing more", async () => {
    const storage = createStorage();
    const driver = unstorageDriver({ storage, lockLeaseMs: 90 });
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.push("before");
    const lockKey = (await storage.getKeys()).find((k) => k.endsWith("q_queue.lock"))!;
    // Another holder's stamp, as after this one's lease ran out while it was paused.
    await storage.setItemRaw(lockKey, new TextEncoder().encode(`v-queue-lock someone-else ${Date.now() + 60_000}\n`));
    await sleep(120);
    await expect(q.push("after")).rejects.toMatchObject({ code: "E_LOCKED", message: expect.stringContaining("Lost the lock") });
    await q.close();
    const reader = await QueueConsumer.open("q", "c", { driver: unstorageDriver({ storage }) });
    expect((await reader.read()).map((m) => m.data)).toEqual(["before"]);
    await reader.close();
  });

  it("a writer whose lease another holder took stops its background retention: the new holder's parts are not its to delete", async () => {
    const storage = createStorage();
    const driver = unstorageDriver({ storage, lockLeaseMs: 90 });
    const q = await QueueWriter.open("q", { driver, durability: "none", retention: { maxParts: 2, intervalMs: 20 } });
    await q.push("before");
    const lockKey = (await storage.getKeys()).find((k) => k.endsWith("q_queue.lock"))!;
    await storage.setItemRaw(lockKey, new TextEncoder().encode(`v-queue-lock someone-else ${Date.now() + 150}\n`));
    await sleep(120);
    await expect(q.push("after")).rejects.toMatchObject({ code: "E_LOCKED" });
    await sleep(60); // the other holder's stamp ran out: a writer without retention takes the queue
    const next = await QueueWriter.open("q", {
      driver: unstorageDriver({ storage, lockLeaseMs: 90, key: "another-process" }),
      durability: "none",
      maxPartBytes: 1024,
    });
    for (let i = 0; i < 6; i++) await next.pushBatch(Array.from({ length: 4 }, () => "x".repeat(300)));
    await sleep(100);
    expect((await listParts(driver, "q")).length).toBeGreaterThan(2);
    await next.close();
    await q.close();
  });

  it("a consumer whose lease another holder took refuses to read or commit", async () => {
    const storage = createStorage();
    const driver = unstorageDriver({ storage, lockLeaseMs: 90 });
    const q = await QueueWriter.open("q", { driver });
    await q.push("m");
    const c = await QueueConsumer.open("q", "c", { driver });
    const lockKey = (await storage.getKeys()).find((k) => k.endsWith("q_info_pop_c.lock"))!;
    await storage.setItemRaw(lockKey, new TextEncoder().encode(`v-queue-lock someone-else ${Date.now() + 60_000}\n`));
    await sleep(120);
    await expect(c.read()).rejects.toMatchObject({ code: "E_LOCKED" });
    await expect(c.commit()).rejects.toMatchObject({ code: "E_LOCKED" });
    await c.close();
    await q.close();
  });

  it("a writer paused past its lease (SIGSTOP) acknowledges nothing once resumed after another took over; no acknowledged message is lost", async () => {
    const dir = await freshDir();
    // Leases of 1 s: a renewal late by a few hundred ms on a loaded machine does not lose one.
    const a = startChild("lease-pusher", dir, "a", "1000");
    try {
      await a.waitFor((line) => line === "ack 5", 45_000);
      a.process.kill("SIGSTOP");
      await sleep(2500);
      const b = await QueueWriter.open("lease", {
        driver: unstorageDriver({ storage: createStorage({ driver: unstorageFs({ base: dir }) }), lockLeaseMs: 1000 }),
      });
      const bAcked: string[] = [];
      for (let i = 0; i < 20; i++) {
        await b.push(`b-${i}`);
        bAcked.push(`b-${i}`);
      }
      const resumedAt = a.lines.length;
      a.process.kill("SIGCONT");
      await a.waitFor((line) => line.startsWith("err "), 30_000);
      await sleep(200);
      const afterResume = a.lines.slice(resumedAt);
      const firstErr = afterResume.findIndex((line) => line.startsWith("err "));
      // Its lock was taken over, and its process superseded on the storage: either says so first.
      expect(["err E_LOCKED", "err E_UNFENCED"]).toContain(afterResume[firstErr]);
      // At most a push already written before the pause is acknowledged after it; none after the first refusal.
      expect(afterResume.slice(firstErr).filter((line) => line.startsWith("ack "))).toEqual([]);
      for (let i = 20; i < 30; i++) {
        await b.push(`b-${i}`);
        bAcked.push(`b-${i}`);
      }
      a.process.kill("SIGKILL");
      await a.exited;
      await b.close();
      const aAcked = a.lines.filter((line) => line.startsWith("ack ")).map((line) => `a-${line.slice(4)}`);
      const reader = await QueueConsumer.open("lease", "check", {
        driver: unstorageDriver({ storage: createStorage({ driver: unstorageFs({ base: dir }) }) }),
      });
      const seen = new Set<unknown>();
      for (let batch = await reader.read({ max: 1000 }); batch.length > 0; batch = await reader.read({ max: 1000 })) for (const m of batch) seen.add(m.data);
      await reader.close();
      for (const message of [...aAcked, ...bAcked]) expect(seen.has(message), message).toBe(true);
    } finally {
      a.process.kill("SIGKILL");
    }
  }, 120_000);
});
