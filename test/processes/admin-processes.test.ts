import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { deleteConsumer, deleteQueue } from "../../src/admin/delete";
import { inspectQueue } from "../../src/inspect/queues";
import { purgeQueue } from "../../src/admin/purge";
import { QueueWriter } from "../../src/writer/writer";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-admin-proc-");

describe("purge and delete refuse while another process holds the queue", () => {
  it("a writer in another process: purge and delete are refused (E_LOCKED, naming it), nothing changes, and both go through once it exits", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.pushBatch(["a", "b"]);
    await q.close();
    const child = startChild("hold-writer", dir, "q");
    try {
      await child.waitFor((line) => line === "ready");
      await expect(purgeQueue(driver, "q")).rejects.toMatchObject({ code: "E_LOCKED", message: expect.stringContaining("its writer is open") });
      await expect(deleteQueue(driver, "q")).rejects.toMatchObject({ code: "E_LOCKED" });
      expect((await inspectQueue(driver, "q"))!.messages).toBe(2);
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
    // Its lock died with it.
    expect((await purgeQueue(driver, "q")).messages).toBe(2);
    await deleteQueue(driver, "q");
    expect(await driver.list("")).toEqual([]);
  });

  it("a consumer in another process: delete and delete-consumer are refused while it is open", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("q", { driver, durability: "none" });
    await q.push("a");
    await q.close();
    const child = startChild("hold-consumer", dir, "q", "c");
    try {
      await child.waitFor((line) => line === "ready");
      await expect(deleteQueue(driver, "q")).rejects.toMatchObject({ code: "E_LOCKED", message: expect.stringContaining('consumer "c" is open') });
      await expect(deleteConsumer(driver, "q", "c")).rejects.toMatchObject({ code: "E_LOCKED" });
      // The writer's lock, taken and let go by the refused delete, is free again.
      await (await QueueWriter.open("q", { driver, durability: "none" })).close();
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
    await deleteConsumer(driver, "q", "c");
    expect((await inspectQueue(driver, "q"))!.consumers).toEqual([]);
  });
});
