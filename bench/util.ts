/**
 * Small helpers shared by the benchmarks: timing, medians, temp dirs and a plain-text table.
 * The machine is shared and noisy, so every figure is the median of a few repeats.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Seconds since an arbitrary origin, with sub-millisecond resolution. */
export function now(): number {
  return performance.now() / 1000;
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** A small seeded PRNG (mulberry32) in [0, 1): the same numbers on every run. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A fresh empty directory under the OS temp dir; remove it with `removeDir`. */
export function tempDir(label: string): string {
  return mkdtempSync(join(tmpdir(), `vq-bench-${label}-`));
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** Runs `body` in a fresh temp dir that is removed afterwards, even on failure. */
export async function inTempDir<T>(label: string, body: (dir: string) => Promise<T>): Promise<T> {
  const dir = tempDir(label);
  try {
    return await body(dir);
  } finally {
    removeDir(dir);
  }
}

/** One measured run: how many messages and payload bytes went through in how many seconds. */
export interface Sample {
  messages: number;
  bytes: number;
  seconds: number;
}

/** The median over repeats, as rates. */
export interface Rate {
  msgsPerSec: number;
  mbPerSec: number;
  /** Every repeat's msgs/s, to show the spread. */
  runs: number[];
}

export function rateOf(samples: Sample[]): Rate {
  const runs = samples.map((s) => s.messages / s.seconds);
  const mbs = samples.map((s) => s.bytes / s.seconds / 1e6);
  return { msgsPerSec: median(runs), mbPerSec: median(mbs), runs };
}

/**
 * Repeats `run` `times` times and returns the median rate. Between repeats it lets the GC
 * settle (when `--expose-gc` is on) so one run's garbage is not billed to the next.
 */
export async function repeat(times: number, run: (i: number) => Promise<Sample>): Promise<Rate> {
  const samples: Sample[] = [];
  for (let i = 0; i < times; i++) {
    (globalThis as { gc?: () => void }).gc?.();
    samples.push(await run(i));
  }
  return rateOf(samples);
}

export function formatRate(value: number): string {
  if (!Number.isFinite(value)) return "-";
  if (value >= 1e6) return `${(value / 1e6).toFixed(2)}M`;
  if (value >= 1e4) return `${Math.round(value / 1e3)}k`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  return value.toFixed(0);
}

/** A left-aligned text table; also usable as Markdown (`markdown: true`). */
export function formatTable(headers: string[], rows: string[][], markdown = false): string {
  const widths = headers.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? "").length)));
  const line = (cells: string[]) => {
    const padded = cells.map((cell, c) => cell.padEnd(widths[c]!));
    return markdown ? `| ${padded.join(" | ")} |` : padded.join("  ");
  };
  const rule = markdown ? `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|` : widths.map((w) => "-".repeat(w)).join("  ");
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

/** Progress lines go to stderr, so stdout holds only the results. */
export function progress(text: string): void {
  process.stderr.write(`  ${text}\n`);
}

/** A free loopback port (asked of the OS, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createNetServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Linux's USER_HZ: /proc/<pid>/stat counts CPU time in these ticks. */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system) a process has used so far, in ms (10 ms steps), from /proc/<pid>/stat. */
export function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // utime and stime: fields 14 and 15 of the whole line, 11 and 12 after the command.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND) * 1000;
}
