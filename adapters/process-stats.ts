/**
 * The standard `process_*` series on Node (the runtime is host-neutral: it takes them from the
 * `metrics.process` hook). Read at each scrape; the descriptor count from /proc (Linux only:
 * left out elsewhere), the limit read once.
 */
import { readFileSync, readdirSync } from "node:fs";
import type { MetricsOptions, ProcessStats } from "../runtime/index";

const startTimeSeconds = performance.timeOrigin / 1000;
let maxFds: { value: number | undefined } | undefined;

export function nodeProcessStats(): ProcessStats {
  const cpu = process.cpuUsage();
  return {
    openFds: openFds(),
    maxFds: (maxFds ??= { value: readMaxFds() }).value,
    residentMemoryBytes: process.memoryUsage.rss(),
    cpuSecondsTotal: (cpu.user + cpu.system) / 1e6,
    startTimeSeconds,
  };
}

/** `metrics` with the Node process hook added, unless off or given one already. */
export function withProcessStats<T extends boolean | MetricsOptions | undefined>(metrics: T): T | MetricsOptions {
  if (metrics === false || (typeof metrics === "object" && metrics.process)) return metrics;
  return { ...(typeof metrics === "object" ? metrics : {}), process: nodeProcessStats };
}

function openFds(): number | undefined {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return undefined;
  }
}

function readMaxFds(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return line ? Number(line[1]) : undefined;
  } catch {
    return undefined;
  }
}
