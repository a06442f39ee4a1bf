import { execFile } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "pathe";
import { describe, expect, it } from "vitest";
import { scriptCommand } from "../helpers/runtime";
import { useTempDirs } from "../helpers/tmp";

/**
 * scripts/check-imports.ts (run by `npm run lint`) on small trees of the rooms' folders: import
 * cycles in every import form and imports against the folders' directions. The project itself
 * passes it (the last test).
 */

const ROOT = resolve(import.meta.dirname, "../..");
const CHECKER = join(ROOT, "scripts/check-imports.ts");
const tempDir = useTempDirs("vq-imports-");

/** A tree of files (path → text) in a fresh temp dir. */
async function tree(files: Record<string, string>): Promise<string> {
  const root = await tempDir();
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text);
  }
  return root;
}

function check(root: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const { command, args } = scriptCommand(CHECKER, [root], "node");
  return new Promise((done) => {
    execFile(command, args, { cwd: ROOT }, (error, stdout, stderr) => done({ code: error ? Number(error.code) : 0, stdout, stderr }));
  });
}

describe("check-imports", () => {
  it("passes a tree without cycles whose folders import the allowed way", async () => {
    const root = await tree({
      "src/queue.ts": `import type { Options } from "./types";\nexport const open = (o: Options) => o;\n`,
      "src/types.ts": "export interface Options { dir: string }\n",
      "protocol/api.ts": `import type { Options } from "../src/types";\nexport type Api = Options;\n`,
      "runtime/app.ts": `import { open } from "../src/queue";\nimport type { Api } from "../protocol/api.ts";\nimport pkg from "../package.json";\nexport const app = (a: Api) => [open(a), pkg];\n`,
      "adapters/cli.ts": `import { app } from "../runtime/app";\nexport default app;\n`,
      "package.json": "{}\n",
    });
    expect(await check(root)).toEqual({ code: 0, stdout: "", stderr: "" });
  });

  it("prints a cycle as a.ts -> b.ts -> a.ts, type imports included, and fails", async () => {
    const root = await tree({
      "src/inspect/browse.ts": `import { browsePartitioned } from "./browse-partitioned";\nexport interface BrowseResult { n: number }\nexport const browse = browsePartitioned;\n`,
      "src/inspect/browse-partitioned.ts": `import type { BrowseResult } from "./browse";\nexport const browsePartitioned = (): BrowseResult => ({ n: 1 });\n`,
    });
    const { code, stdout } = await check(root);
    expect(code).toBe(1);
    expect(stdout.split("\n")).toEqual([
      "import cycle: src/inspect/browse-partitioned.ts -> src/inspect/browse.ts -> src/inspect/browse-partitioned.ts",
      "1 import cycle: move what both sides use (types most often) into a module of their folder that imports neither, e.g. its types.ts.",
      "",
    ]);
  });

  it("finds cycles through export … from, import(…) types and folder indexes, not through comments or strings", async () => {
    const root = await tree({
      "client/index.ts": `export { a } from "./a";\n// import "./c";\nexport const text = 'import("./c")';\n`,
      "client/a.ts": `export const a = 1;\nexport type B = typeof import("./b/index.ts");\n`,
      "client/b/index.ts": `import type { C } from "../c";\nexport type { C };\n`,
      "client/c.ts": `export type C = import("./index").Text;\n`,
    });
    const { code, stdout } = await check(root);
    expect(code).toBe(1);
    expect(stdout).toContain("import cycle: client/a.ts -> client/b/index.ts -> client/c.ts -> client/index.ts -> client/a.ts\n");
    expect(stdout).toContain("1 import cycle:");
  });

  it("prints an import against the folders' directions, with the folders allowed and why, and fails", async () => {
    const root = await tree({
      "src/core/queue.ts": `import type { Api } from "../../protocol/api";\nexport type Q = Api;\n`,
      "src/core/errors.ts": `export type { ScanOptions } from "../log/scan";\n`,
      "src/log/scan.ts": "export type ScanOptions = string;\n",
      "protocol/api.ts": "export type Api = string;\n",
      "client/index.ts": `export { app } from "../runtime/app";\n`,
      "runtime/app.ts": "export const app = 1;\n",
    });
    const { code, stdout } = await check(root);
    expect(code).toBe(1);
    expect(stdout.split("\n")).toEqual([
      "wrong-way import: client/index.ts -> runtime/app.ts: client/ imports only from client/, protocol/, src/ (the client runs in browsers: it shares only the wire format and the engine's pure modules with the server)",
      "wrong-way import: src/core/errors.ts -> src/log/scan.ts: src/core/ imports only from src/core/ (errors, names, option checks and the driver interface are the bottom of the engine)",
      "wrong-way import: src/core/queue.ts -> protocol/api.ts: src/core/ imports only from src/core/ (errors, names, option checks and the driver interface are the bottom of the engine)",
      "3 wrong-way imports: the folders' directions are in scripts/import-rules.ts (FOLDER_IMPORTS).",
      "",
    ]);
  });

  it("passes the project itself", async () => {
    const { code, stdout } = await check(ROOT);
    expect(stdout).toBe("");
    expect(code).toBe(0);
  });
});
