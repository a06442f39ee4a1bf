import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-proc-");

describe("across processes", () => {
  it("refuses a second writer while the first lives, and frees the lock when it is killed -9", async () => {
    const dir = await freshDir();
    const holder = startChild("hold-writer", dir, "jobs");
    await holder.waitFor((line) => line === "ready");
    const error = await QueueWriter.open("jobs", { driver: fsDriver({ dir }) }).catch((e: Error & { code?: string }) => e);
    expect(error).toMatchObject({ code: "E_LOCKED" });
    expect((error as Error).message).toContain('Queue "jobs" already has a writer');
    holder.process.kill("SIGKILL");
    await holder.exited;
    const writer = await QueueWriter.open("jobs", { driver: fsDriver({ dir }) });
    await writer.push("after the crash");
    await writer.close();
  });

  it("refuses a second reader of one consumer name in another process", async () => {
    const dir = await freshDir();
    const writer = await QueueWriter.open("jobs", { driver: fsDriver({ dir }) });
    const holder = startChild("hold-consumer", dir, "jobs", "worker");
    await holder.waitFor((line) => line === "ready");
    await expect(QueueConsumer.open("jobs", "worker", { driver: fsDriver({ dir }) })).rejects.toMatchObject({ code: "E_LOCKED" });
    holder.process.kill("SIGKILL");
    await holder.exited;
    const consumer = await QueueConsumer.open("jobs", "worker", { driver: fsDriver({ dir }) });
    await consumer.close();
    await writer.close();
  });

  it("resumes in this process where a consumer in another process committed", async () => {
    const dir = await freshDir();
    const writer = await QueueWriter.open("jobs", { driver: fsDriver({ dir }) });
    await writer.pushBatch(["a", "b", "c", "d", "e"]);
    const child = startChild("read-commit", dir, "jobs", "worker", "2");
    expect(JSON.parse(await child.waitFor((line) => line.startsWith("[")))).toEqual(["a", "b"]);
    await child.exited;
    const consumer = await QueueConsumer.open("jobs", "worker", { driver: fsDriver({ dir }) });
    expect((await consumer.read({ max: 10 })).map((m) => m.data)).toEqual(["c", "d", "e"]);
    await consumer.close();
    await writer.close();
  });

  it("wakes a waiting consumer when a writer in another process pushes", async () => {
    const dir = await freshDir();
    await (await QueueWriter.open("jobs", { driver: fsDriver({ dir }) })).close();
    const consumer = await QueueConsumer.open("jobs", "worker", { driver: fsDriver({ dir }), pollIntervalMs: 20 });
    const waiting = consumer.wait({ timeoutMs: 15_000 });
    const child = startChild("push", dir, "jobs", "from another process");
    expect(await child.exited).toBe(0);
    expect(await waiting).toBe(true);
    expect((await consumer.read()).map((m) => m.data)).toEqual(["from another process"]);
    await consumer.close();
  });
});
