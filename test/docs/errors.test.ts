import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

/** The codes of the `VQueueErrorCode` union in src/errors.ts. */
function engineCodes(): string[] {
  const source = read("src/errors.ts");
  const union = /export type VQueueErrorCode\s*=([\s\S]*?);/.exec(source);
  expect(union, "src/errors.ts declares VQueueErrorCode").not.toBeNull();
  return [...union![1]!.matchAll(/"(E_[A-Z_]+)"/g)].map((m) => m[1]!).sort();
}

/** The codes the README's "Errors" table lists, in its first column. */
function readmeCodes(): string[] {
  const readme = read("README.md");
  const start = readme.indexOf("\n### Errors\n");
  expect(start, "the README has an Errors section").toBeGreaterThan(0);
  const section = readme.slice(start + 1, readme.indexOf("\n#", start + 2));
  return [...section.matchAll(/^\| `(E_[A-Z_]+)` \|/gm)].map((m) => m[1]!).sort();
}

describe("the README's Errors table", () => {
  it("lists every code a VQueueError may carry, and no other", () => {
    expect(readmeCodes()).toEqual(engineCodes());
  });
});
