/**
 * Run by test/runtimes/_suite.ts inside vitest on Bun and Deno with VQ_EXPECT_RUNTIME set: fails
 * unless the test workers really run on that runtime (not on a Node picked up from PATH).
 */
import { expect, it } from "vitest";
import { currentRuntime } from "../helpers/runtime";

it("runs on the runtime the caller asked for", () => {
  const expected = process.env.VQ_EXPECT_RUNTIME ?? currentRuntime;
  expect(currentRuntime).toBe(expected);
});
