/**
 * The test tree mirrors the code's rooms: every test file sits in a folder named by what it tests,
 * and no two test files share a name (a failure names its file unambiguously).
 */
import { readdirSync } from "node:fs";
import { basename, join, resolve } from "pathe";
import { expect, it } from "vitest";

const TEST_ROOT = resolve(import.meta.dirname, "..");

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "fixtures" || entry.name === "node_modules") return [];
    const path = join(dir, entry.name);
    return entry.isDirectory() ? testFiles(path) : entry.name.endsWith(".test.ts") ? [path] : [];
  });
}

it("no test file lies loose at test/, and no two share a name", () => {
  const files = testFiles(TEST_ROOT).map((file) => file.slice(TEST_ROOT.length + 1));
  expect(files.length).toBeGreaterThan(100);
  expect(files.filter((file) => !file.includes("/"))).toEqual([]);
  const byName = new Map<string, string[]>();
  for (const file of files) byName.set(basename(file), [...(byName.get(basename(file)) ?? []), file]);
  expect([...byName.values()].filter((same) => same.length > 1)).toEqual([]);
});
