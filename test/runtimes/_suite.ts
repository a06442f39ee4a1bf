/**
 * The engine's behaviour suite, the HTTP suite, the client's and the library's crash tests, run by
 * vitest on Bun or Deno (test/runtimes/bun.test.ts, deno.test.ts). What cannot run on a runtime is
 * left out by name, with the reason; the README's "Runtimes" section says the same.
 */
import { describe, expect, it } from "vitest";
import { runVitestOn } from "./_vitest";

/**
 * The files every runtime runs: the engine on fs (its leased locks too), memory, unstorage (memory, fs, redis) and redis
 * (the redis ones need redis-server, as on Node), the HTTP API, the client, the crash tests.
 */
export const RUNTIME_FILES = [
  "test/runtimes/probe.test.ts",
  "test/engine",
  "test/drivers/fs.test.ts",
  "test/drivers/fs-lease.test.ts",
  "test/drivers/memory.test.ts",
  "test/drivers/unstorage-memory.test.ts",
  "test/drivers/unstorage-fs.test.ts",
  "test/drivers/unstorage-redis.test.ts",
  "test/drivers/redis.test.ts",
  "test/http",
  "test/client/client.test.ts",
  "test/client/browse.test.ts",
  "test/client/worker.test.ts",
  "test/client/produce-retry.test.ts",
  "test/crash.test.ts",
  "test/produce-crash.test.ts",
];

export interface Exclusion {
  file: string;
  why: string;
}

/** Runs RUNTIME_FILES less `excluded` on `runtime`: every test passes, and the count is close to Node's. */
export function describeRuntimeSuite(runtime: "bun" | "deno", excluded: Exclusion[], minimumTests: number): void {
  describe(`the test suites on ${runtime}`, () => {
    it(`pass under vitest on ${runtime} (at least ${minimumTests} tests)`, async () => {
      const exclude = excluded.flatMap((e) => ["--exclude", e.file]);
      // About 6 minutes beside the rest of the suite on 2 cores; room for a slower machine.
      const run = await runVitestOn(runtime, [...exclude, ...RUNTIME_FILES], { VQ_EXPECT_RUNTIME: runtime }, 1_080_000);
      console.log(
        `${runtime}: ${run.files} files, ${run.passed} passed, ${run.failed.length} failed, ${run.skipped} skipped` +
          (excluded.length > 0 ? `; left out: ${excluded.map((e) => `${e.file} (${e.why})`).join("; ")}` : ""),
      );
      expect(run.failed, run.output.slice(-4000)).toEqual([]);
      // The probe fails unless its worker runs on `runtime` (VQ_EXPECT_RUNTIME).
      expect(run.passedNames).toContain("runs on the runtime the caller asked for");
      expect(run.passed).toBeGreaterThanOrEqual(minimumTests);
    }, 1_140_000);
  });
}
