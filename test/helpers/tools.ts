/**
 * Tools that only one suite needs (Bun, Deno, Miniflare, Playwright, the OpenAPI linter and
 * client generator), kept out of the
 * devDependencies so that a first `npm install` stays light: each suite asks for its tool here, on
 * first use. A tool comes from node_modules when a developer installed it at the pinned version,
 * else from a cache folder in the repo (`.tmp/tools/<name>@<version>`, git-ignored), where it is
 * installed once with npm.
 *
 * `VQ_TOOLS_DIR` moves the cache; `VQ_TOOLS_SKIP_NODE_MODULES=1` ignores node_modules (to check a
 * first run's install without removing anything).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { join, resolve } from "pathe";

/** The pinned versions: the one place to change them. */
export const TOOL_VERSIONS = {
  bun: "1.4.5",
  deno: "2.9.6",
  miniflare: "4.20260426.0",
  "playwright-core": "1.65.1",
  // test/http/openapi.test.ts: the validator (13 needs Node 22), the linter, and a client generated from the document.
  "@apidevtools/swagger-parser": "12.1.0",
  "@redocly/openapi-core": "1.34.24",
  "openapi-typescript": "7.13.0",
  "openapi-fetch": "0.17.0",
} as const;

export type Tool = keyof typeof TOOL_VERSIONS;

const ROOT = resolve(import.meta.dirname, "../..");

function cacheDir(): string {
  return resolve(ROOT, process.env.VQ_TOOLS_DIR || ".tmp/tools");
}

function installedAt(modules: string, tool: Tool): boolean {
  try {
    return (JSON.parse(readFileSync(join(modules, tool, "package.json"), "utf8")) as { version?: string }).version === TOOL_VERSIONS[tool];
  } catch {
    return false;
  }
}

/**
 * The `node_modules` directory that holds `tool` at its pinned version, installing it into the
 * cache when neither has it. Safe when several test files ask at once: each installs into its own
 * staging folder and renames it into place; the first rename wins, the others are dropped.
 */
export function toolModules(tool: Tool): string {
  const repoModules = join(ROOT, "node_modules");
  if (process.env.VQ_TOOLS_SKIP_NODE_MODULES !== "1" && installedAt(repoModules, tool)) return repoModules;
  // A scoped name's "/" would make a folder of its scope.
  const home = join(cacheDir(), `${tool.replace("/", "+")}@${TOOL_VERSIONS[tool]}`);
  const modules = join(home, "node_modules");
  if (installedAt(modules, tool)) return modules;
  mkdirSync(cacheDir(), { recursive: true });
  const staging = mkdtempSync(join(cacheDir(), `.staging-${tool.replace("/", "+")}-`));
  try {
    const args = [
      "install",
      "--prefix",
      staging,
      "--no-save",
      "--no-audit",
      "--no-fund",
      "--prefer-offline",
      "--loglevel=error",
      `${tool}@${TOOL_VERSIONS[tool]}`,
    ];
    // Says why this first run waits (bun and deno are about 100 MB each).
    process.stderr.write(`[tools] installing ${tool}@${TOOL_VERSIONS[tool]} into ${home}\n`);
    try {
      execFileSync("npm", args, { stdio: ["ignore", "ignore", "pipe"], encoding: "utf8" });
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? "";
      throw new Error(`could not install ${tool}@${TOOL_VERSIONS[tool]} into ${home} (npm ${args.join(" ")}): ${stderr.trim() || (error as Error).message}`, {
        cause: error,
      });
    }
    try {
      renameSync(staging, home);
    } catch (error) {
      // Another test file installed it first: theirs is as good.
      if (!installedAt(modules, tool)) throw error;
    }
  } finally {
    if (existsSync(staging)) rmSync(staging, { recursive: true, force: true });
  }
  return modules;
}

/** The path of a tool's command (`bun`, `deno`). */
export function toolBinary(tool: "bun" | "deno"): string {
  return join(toolModules(tool), ".bin", tool);
}

/** The tool's module, imported from wherever `toolModules` found it: its ESM entry when it has one, as an `import` statement would. */
export async function importTool<T>(tool: Tool): Promise<T> {
  const modules = toolModules(tool);
  const dir = join(modules, tool);
  const { exports } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { exports?: unknown };
  const root = (typeof exports === "object" && exports !== null && "." in exports ? (exports as Record<string, unknown>)["."] : exports) as {
    import?: unknown;
  };
  const entry = typeof root?.import === "string" ? join(dir, root.import) : createRequire(join(modules, "..", "noop.js")).resolve(tool);
  return (await import(pathToFileURL(entry).href)) as T;
}
