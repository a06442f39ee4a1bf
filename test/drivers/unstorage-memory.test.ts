import { createStorage } from "unstorage";
import { describe, expect, it } from "vitest";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { describeEngineOnDriver } from "./engine-suite";
import { describeUnstorageDriver } from "./unstorage-suite";

describeEngineOnDriver("unstorage (memory)", () => {
  const storage = createStorage();
  return { driver: unstorageDriver({ storage }), reopen: () => unstorageDriver({ storage }) };
});

describeUnstorageDriver("memory", async () => {
  const storage = createStorage();
  return { storage, reopenStorage: () => storage };
});

describe("unstorage driver options", () => {
  it("requires a storage and checks its options", () => {
    expect(() => unstorageDriver({} as never)).toThrow(/Missing required option `storage`/);
    expect(() => unstorageDriver({ storage: createStorage(), maxChunkBytes: 0 })).toThrow(/maxChunkBytes/);
    expect(() => unstorageDriver({ storage: createStorage(), lockLeaseMs: 1 })).toThrow(/lockLeaseMs/);
    expect(() => unstorageDriver({ storage: createStorage(), instances: "two" as never })).toThrow(
      /Invalid instances "two" of the unstorage driver: use "one" .* or "many"/,
    );
  });
});
