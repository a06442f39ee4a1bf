/**
 * What Bun and Deno must prove, run by vitest on that runtime (test/runtimes/bun.test.ts,
 * deno.test.ts): the parts whose behaviour depends on the runtime, not the engine's logic again.
 * The engine (src/) is plain TypeScript with no `node:` imports: Node's run of test/engine and of
 * the driver suites proves it, and the same code runs here. What differs between runtimes is I/O,
 * processes and the HTTP server, so the runtimes run:
 * - the fs driver's whole behaviour suite, its pid locks and its leased locks (files, fsync,
 *   rename, link, the thread pool), and the redis driver's (ioredis' sockets, Lua, leases, fences);
 * - a produce-consume round trip on every storage (memory, fs, unstorage over memory, fs and
 *   redis, redis);
 * - the HTTP server's start, routes, long polls and `serve`'s signals (srvx on Bun.serve and
 *   Deno.serve);
 * - the client's calls, `worker()` and its produce retries over the runtime's `fetch`;
 * - the crash tests, whose children are killed on the runtime.
 * What cannot run on a runtime is left out by name, with the reason; the "Runtimes" section of
 * docs/runtimes.md says the same.
 */
import { describe, expect, it } from "vitest";
import { runVitestOn } from "./_vitest";

export const RUNTIME_FILES = [
  "test/runtimes/probe.test.ts",
  "test/runtimes/round-trip.test.ts",
  "test/drivers/fs.test.ts",
  "test/drivers/fs-lease.test.ts",
  "test/drivers/redis.test.ts",
  "test/http/api.test.ts",
  "test/http/long-poll.test.ts",
  "test/http/serve-cli.test.ts",
  "test/client/client.test.ts",
  "test/client/worker.test.ts",
  "test/client/produce-retry.test.ts",
  "test/processes/crash.test.ts",
  "test/processes/produce-crash.test.ts",
];

export interface Exclusion {
  file: string;
  why: string;
}

/** Runs RUNTIME_FILES less `excluded` on `runtime`: every test passes, and the count is close to Node's. */
export function describeRuntimeSuite(runtime: "bun" | "deno", excluded: Exclusion[], minimumTests: number): void {
  describe(`the test suites on ${runtime}`, () => {
    it(`pass under vitest on ${runtime} (at least ${minimumTests} tests)`, async () => {
      // The files are named one by one: one left out is not named (vitest's --exclude does not reach its projects).
      expect(
        excluded.map((e) => e.file).filter((file) => !RUNTIME_FILES.includes(file)),
        "left out, but not in RUNTIME_FILES",
      ).toEqual([]);
      const files = RUNTIME_FILES.filter((file) => !excluded.some((e) => e.file === file));
      // A few minutes on 2 cores beside the rest of the suite; room for a machine at a load of 4.
      const run = await runVitestOn(runtime, files, { VQ_EXPECT_RUNTIME: runtime, VQ_TEST_WORKERS: "1" }, 1_080_000);
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
