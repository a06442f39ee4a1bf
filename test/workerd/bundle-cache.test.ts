/**
 * The workerd tests' bundle cache (_bundle.ts): a bundle is taken from disk only while every
 * module it holds is unchanged; a change to any of them bundles again.
 */
import { rm, stat, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import { useTempDirs } from "../helpers/tmp";
import { bundleThroughDisk, cacheFile } from "./_bundle";

const tempDir = useTempDirs("vq-bundle-");

describe("the workerd bundle cache", () => {
  it("reuses a kept bundle while its modules are unchanged, and bundles again when one of them changes", async () => {
    const dir = await tempDir();
    const entry = join(dir, "entry.ts");
    const dep = join(dir, "dep.ts");
    await writeFile(entry, `import { word } from "./dep";\nexport default { fetch: () => new Response(word) };\n`);
    await writeFile(dep, `export const word = "first-word";\n`);
    try {
      expect(await bundleThroughDisk(entry)).toContain("first-word");
      const kept = (await stat(cacheFile(entry))).mtimeMs;
      expect(await bundleThroughDisk(entry)).toContain("first-word");
      expect((await stat(cacheFile(entry))).mtimeMs).toBe(kept); // read, not written again
      // A module the entry imports changes (not the entry itself): the bundle follows it.
      await writeFile(dep, `export const word = "second-word";\n`);
      const again = await bundleThroughDisk(entry);
      expect(again).toContain("second-word");
      expect(again).not.toContain("first-word");
    } finally {
      await rm(cacheFile(entry), { force: true });
    }
  });
});
