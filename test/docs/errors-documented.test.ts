import { describe, expect, it } from "vitest";
import { docSection, projectFile } from "../helpers/readme";

/** The codes of the `VQueueErrorCode` union in src/core/errors.ts. */
function engineCodes(): string[] {
  const source = projectFile("src/core/errors.ts");
  const union = /export type VQueueErrorCode\s*=([\s\S]*?);/.exec(source);
  expect(union, "src/core/errors.ts declares VQueueErrorCode").not.toBeNull();
  return [...union![1]!.matchAll(/"(E_[A-Z_]+)"/g)].map((m) => m[1]!).sort();
}

/** The codes the "Errors" table of docs/logs.md lists, in its first column. */
function documentedCodes(): string[] {
  return [...docSection("docs/logs.md", "Errors").matchAll(/^\| `(E_[A-Z_]+)` \|/gm)].map((m) => m[1]!).sort();
}

describe("the Errors table of docs/logs.md", () => {
  it("lists every code a VQueueError may carry, and no other", () => {
    expect(documentedCodes()).toEqual(engineCodes());
  });
});
