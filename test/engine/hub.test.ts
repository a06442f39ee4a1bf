import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { queueHub } from "../../src/storage/hub";

describe("QueueHub: in-process wake-ups", () => {
  it("is one object per storage and queue, met by two driver instances on the same storage", () => {
    const driver = memoryDriver();
    const same = { ...driver }; // another instance, same storageKey
    const hub = queueHub(driver, "q");
    const off = hub.onChange(() => {});
    expect(queueHub(same, "q")).toBe(hub);
    expect(queueHub(driver, "other")).not.toBe(hub);
    expect(queueHub(memoryDriver(), "q")).not.toBe(hub);
    off();
  });

  it("tells listeners of each batch, and knows the writer's edge only while a writer is registered", () => {
    const hub = queueHub(memoryDriver(), "q");
    const hints: unknown[] = [];
    const off = hub.onChange((hint) => hints.push(hint));
    expect(hub.hasListeners).toBe(true);
    const unregister = hub.registerWriter();
    expect(hub.hasWriter).toBe(true);
    hub.emit({ part: 0, edge: 30 });
    expect(hub.writerEdge).toEqual({ part: 0, edge: 30 });
    unregister();
    unregister(); // once only
    expect(hub.hasWriter).toBe(false);
    expect(hub.writerEdge).toBeUndefined();
    expect(hints).toEqual([{ part: 0, edge: 30 }, undefined]);
    off();
    expect(hub.hasListeners).toBe(false);
  });

  it("is let go when nobody uses it, and a later user gets a fresh one", () => {
    const driver = memoryDriver();
    const hub = queueHub(driver, "q");
    hub.onChange(() => {})();
    expect(queueHub(driver, "q")).not.toBe(hub);
  });
});
