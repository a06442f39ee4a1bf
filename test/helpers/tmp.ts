import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll } from "vitest";

/**
 * Fresh temp directories for one test file (or one describe), all removed after its tests: the
 * one temp-dir helper of the tests. Made at once (no await needed), so a driver factory can take one.
 */
export function useTempDirs(prefix: string): () => string {
  const dirs: string[] = [];
  afterAll(() => {
    // Retried: a child killed at the end of a test may still be writing into it (ENOTEMPTY).
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(dir);
    return dir;
  };
}
