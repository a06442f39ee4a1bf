import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { defineDriver } from "../../src/core/driver";

// Checked by `npm run typecheck` (tsc): a broken signature fails CI before any test runs.
describe("driver factories keep their signatures", () => {
  it("takes optional options as optional, and checks their types", () => {
    expect(memoryDriver().name).toBe("memory");
    expect(fsDriver().name).toBe("fs");
    // @ts-expect-error `name` is a string
    expect(() => memoryDriver({ name: 5 })).not.toThrow();
    const custom = defineDriver((options: { label: string }) => ({ ...memoryDriver(), name: options.label }));
    // @ts-expect-error `options` is required by this factory
    expect(() => custom()).toThrow();
    expect(custom({ label: "mine" }).name).toBe("mine");
  });
});
