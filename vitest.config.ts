import { defineConfig } from "vitest/config";

/**
 * Files that must run alone: they build the playground apps in place (one `playground/<app>` for
 * all), or they run several servers or a Redis Cluster and pause or kill them on purpose, so their
 * faults must meet a machine that is not also running 2 other files. They run after the rest.
 */
export const ALONE = [
  "test/hosts/**/*.test.ts",
  "test/instances/multi-instance.test.ts",
  "test/instances/redis-cluster-instances.test.ts",
  "test/drivers/redis-sentinel.test.ts",
  "test/instances/shared-chaos.test.ts",
  "test/drivers/redis-cluster.test.ts",
  "test/engine/partitioned-multi.test.ts",
  "test/life/fs-processes.test.ts",
  "test/http/fd-pressure.test.ts",
  "test/http/fd-limit.test.ts",
];

/**
 * Every other file waits on files, sockets, child processes and timers far more than on the CPU,
 * and none shares a port, a directory or a Redis with another (each takes free ports and temp
 * dirs), so 3 run at once on a 2-core machine. `VQ_TEST_WORKERS` sets another count (the runtime
 * suites run their files one at a time on Bun and Deno, beside the rest).
 */
const PARALLEL_WORKERS = workerCount(process.env.VQ_TEST_WORKERS);

function workerCount(value: string | undefined): number {
  if (value === undefined || value === "") return 3;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`VQ_TEST_WORKERS must be a whole number >= 1 (got ${JSON.stringify(value)})`);
  return n;
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // expect.poll waits for what happens next: vitest's 1 s default is missed at a load average of 4.
    expect: { poll: { timeout: 10_000 } },
    projects: [
      {
        extends: true,
        test: { name: "parallel", include: ["test/**/*.test.ts"], exclude: ALONE, maxWorkers: PARALLEL_WORKERS, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: "alone", include: ALONE, maxWorkers: 1, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
