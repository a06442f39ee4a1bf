import { existsSync } from "node:fs";
import { relative, resolve } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * Files that must run apart from the rest: they run several servers or a Redis Cluster and pause
 * or kill them on purpose, so their faults must meet a machine that is not also running the other
 * files. They run after the rest, 2 at a time (each keeps about one core busy; each takes its own
 * ports, dirs and Redis). (The playground builds run beside the rest: a preset or a scratch app
 * builds in its own temporary copy, and the playground's `npm ci` is taken by one file at a time.)
 */
export const ALONE = [
  "test/hosts/node-cluster-chaos.test.ts",
  "test/instances/multi-instance.test.ts",
  "test/instances/any-instance.test.ts",
  "test/instances/redis-cluster-instances.test.ts",
  "test/drivers/redis-sentinel.test.ts",
  "test/instances/shared-chaos.test.ts",
  "test/instances/schedules-chaos.test.ts",
  "test/drivers/redis-cluster.test.ts",
  "test/engine/partitioned-multi.test.ts",
  "test/life/fs-processes.test.ts",
  "test/http/fd-pressure.test.ts",
  "test/http/fd-limit.test.ts",
];

/**
 * The files that take a minute or more (the slowest in `.ci/run`'s list), longest first: they start
 * first in their project, and the short files fill the other workers beside them. Vitest's own
 * order puts the files it has no times for (a fresh clone) largest first, which started the
 * runtime suites' few lines last, alone for their last 2 minutes.
 */
export const LONG_FIRST = [
  "test/runtimes/bun.test.ts",
  "test/runtimes/deno.test.ts",
  "test/workerd/durable-object-driver.test.ts",
  "test/drivers/fs.test.ts",
  "test/drivers/unstorage-redis.test.ts",
  "test/drivers/unstorage-fs.test.ts",
  "test/drivers/fs-lease.test.ts",
  "test/hosts/nuxt-app.test.ts",
  "test/browser/dashboard-prefix.test.ts",
  "test/drivers/unstorage-memory.test.ts",
  "test/docs/doc-blocks.test.ts",
  "test/drivers/redis.test.ts",
  "test/engine/partitioned.test.ts",
  "test/hosts/cloudflare-module.test.ts",
  "test/hosts/nuxt.test.ts",
  "test/hosts/node-cluster-chaos.test.ts",
  "test/instances/multi-instance.test.ts",
  "test/instances/redis-cluster-instances.test.ts",
  "test/drivers/redis-cluster.test.ts",
  "test/instances/shared-chaos.test.ts",
];

// A file moved or renamed would silently lose its place (or run beside others, for ALONE).
for (const path of [...ALONE, ...LONG_FIRST].filter((p) => !p.includes("*"))) {
  if (!existsSync(resolve(import.meta.dirname, path))) throw new Error(`vitest.config.ts names ${path}, which does not exist: update ALONE or LONG_FIRST`);
}

/** Vitest's order (projects, then its times or sizes), with each project's LONG_FIRST files moved to its front. */
class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const projectOrder = new Map<string, number>();
    for (const spec of sorted) if (!projectOrder.has(spec.project.name)) projectOrder.set(spec.project.name, projectOrder.size);
    const rank = (spec: TestSpecification) => {
      const i = LONG_FIRST.indexOf(relative(spec.project.config.root, spec.moduleId).replaceAll("\\", "/"));
      return i < 0 ? LONG_FIRST.length : i;
    };
    // A stable sort: the files outside LONG_FIRST keep vitest's order.
    return sorted.sort((a, b) => projectOrder.get(a.project.name)! - projectOrder.get(b.project.name)! || rank(a) - rank(b));
  }
}

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
    sequence: { sequencer: LongFirstSequencer },
    projects: [
      {
        extends: true,
        test: { name: "parallel", include: ["test/**/*.test.ts"], exclude: ALONE, maxWorkers: PARALLEL_WORKERS, sequence: { groupOrder: 0 } },
      },
      {
        extends: true,
        test: { name: "alone", include: ALONE, maxWorkers: Math.min(2, PARALLEL_WORKERS), sequence: { groupOrder: 1 } },
      },
    ],
  },
});
