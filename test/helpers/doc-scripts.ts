/**
 * Running the programs the docs show, as written: their code blocks, saved as scripts under the
 * project (git-ignored .tmp/), where `v-queue` resolves to the package itself (dist/: run
 * `npm run build` first), each run in its own Node process.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "pathe";
import { afterAll, expect } from "vitest";
import { projectFile } from "./readme";
import { startScript } from "./spawn";

const ROOT = resolve(import.meta.dirname, "../..");

/** The code blocks of a Markdown file of the project in language `lang` (`js`), in order. */
export function codeBlocks(file: string, lang: string): string[] {
  return [...projectFile(file).matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\`$`, "gm"))].map((m) => m[1]!);
}

/** A folder for this test file's scripts, removed after its tests; returns a writer of `name` with `source`, giving its path. */
export function useScripts(): (name: string, source: string) => string {
  mkdirSync(join(ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(ROOT, ".tmp", "doc-scripts-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return (name, source) => {
    const path = join(dir, name);
    writeFileSync(path, source);
    return path;
  };
}

/** `source` with `from` (which it must contain) replaced by `to`: a program's address pointed at the test's server. */
export function pointed(source: string, from: string, to: string): string {
  expect(source).toContain(from);
  return source.replaceAll(from, to);
}

/** Runs a script that runs until stopped (a worker, a consumer loop): waits for each of `lines` printed, then sends `signal`; resolves with its stdout lines and exit code. */
export async function runUntil(path: string, lines: string[], signal: NodeJS.Signals = "SIGTERM"): Promise<{ lines: string[]; code: number | null }> {
  const child = startScript(path);
  try {
    for (const line of lines) await child.waitFor((printed) => printed === line, 30_000);
  } finally {
    child.process.kill(signal);
  }
  return { lines: child.lines, code: await child.exited };
}
