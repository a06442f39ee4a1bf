import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import vQueue from "../../adapters/nitro";
import { resolveQueueAppOptions } from "../../runtime/options";
import { pruneQueue } from "../../src/retention/prune";
import { QueueWriter } from "../../src/writer/writer";

describe("retention and index options are checked everywhere with one wording", () => {
  it("the writer's", async () => {
    const driver = memoryDriver();
    await expect(QueueWriter.open("q", { driver, indexInterval: 0 })).rejects.toMatchObject({
      code: "E_OPTION",
      message: "Invalid indexInterval 0: use an integer from 1 to 1000000000.",
    });
    await expect(QueueWriter.open("q", { driver, retention: { maxParts: -1, deleteConsumed: 1 as never } })).rejects.toMatchObject({
      code: "E_OPTION",
      message: expect.stringContaining("Invalid retention.maxParts -1: use an integer from 1 up."),
    });
    await expect(QueueWriter.open("q", { driver, retention: { maxParts: -1, deleteConsumed: 1 as never } })).rejects.toMatchObject({
      message: expect.stringContaining("Invalid retention.deleteConsumed 1: use true or false."),
    });
    const q = await QueueWriter.open("q", { driver, retention: { maxAgeMs: 1000 } });
    await expect(pruneQueue(driver, "q", { maxBytes: 0 })).rejects.toMatchObject({ code: "E_OPTION" });
    await expect(pruneQueue(driver, "nope", { maxBytes: 1 })).rejects.toMatchObject({ code: "E_NOT_FOUND" });
    await q.close();
  });

  it("the HTTP runtime's, the per-queue ones, and the Nitro module's", () => {
    expect(() => resolveQueueAppOptions({ driver: memoryDriver(), retention: { maxAgeMs: 0 } })).toThrow(
      "Invalid retention.maxAgeMs 0: use an integer from 1 up.",
    );
    expect(() => resolveQueueAppOptions({ driver: memoryDriver(), queues: { orders: { retention: { maxParts: 0 } } } })).toThrow(
      "Invalid queues.orders.retention.maxParts 0",
    );
    const options = resolveQueueAppOptions({
      driver: memoryDriver(),
      retention: { maxParts: 9 },
      queues: { orders: { retention: { maxAgeMs: 5 } }, audit: {} },
    });
    expect(options.retentionFor("orders")).toEqual({ maxAgeMs: 5 });
    expect(options.retentionFor("audit")).toBeUndefined(); // its own setting: none
    expect(options.retentionFor("other")).toEqual({ maxParts: 9 });
    expect(() => vQueue({ retention: { maxBytes: -5 } })).toThrow(
      expect.objectContaining({ code: "E_OPTION", message: "Invalid retention.maxBytes -5: use an integer from 1 up." }),
    );
    expect(() => vQueue({ queues: { "a b": {} } })).toThrow("Invalid queue name");
  });
});
