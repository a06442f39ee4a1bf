/**
 * Runs test files with vitest itself on Bun or Deno: the runner and its test workers (forks of the
 * runtime's own binary) run there, so `src/`, the drivers, h3 and the client run on that runtime
 * with the very test files Node runs. The JSON report says what ran; the caller asserts on it.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { fileURLToPath } from "node:url";
import { runtimeBinary, type Runtime } from "../helpers/runtime";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const VITEST = join(ROOT, "node_modules/vitest/vitest.mjs");

export interface RuntimeRun {
  files: number;
  passed: number;
  /** The full names of the tests that passed. */
  passedNames: string[];
  failed: string[];
  skipped: number;
  /** The runner's output (its last lines explain a failure). */
  output: string;
}

interface JsonReport {
  testResults: { name: string; status: string; message?: string; assertionResults: { fullName: string; status: string; failureMessages?: string[] }[] }[];
}

/** `vitest run <files>` on `runtime` (Deno with -A: vitest forks workers and reads its own config). */
export async function runVitestOn(runtime: "bun" | "deno", files: string[], extraEnv: Record<string, string>, timeoutMs: number): Promise<RuntimeRun> {
  const out = await mkdtemp(join(tmpdir(), `vq-${runtime}-vitest-`));
  const report = join(out, "report.json");
  const vitestArgs = [VITEST, "run", "--reporter=json", `--outputFile=${report}`, ...files];
  const args = runtime === "deno" ? ["run", "-A", ...vitestArgs] : vitestArgs;
  // The outer vitest's variables would make the inner one think it is a worker.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith("VITEST") && key !== "NODE_ENV" && key !== "TEST"));
  try {
    const child = spawn(runtimeBinary(runtime as Runtime), args, { cwd: ROOT, env: { ...env, ...extraEnv, NO_COLOR: "1" }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (output += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (output += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    await new Promise((done) => child.once("close", done));
    clearTimeout(timer);
    const json = JSON.parse(await readFile(report, "utf8").catch(() => `{"testResults":[]}`)) as JsonReport;
    if (json.testResults.length === 0) throw new Error(`vitest on ${runtime} wrote no report (timed out or crashed?): ${output.slice(-3000)}`);
    const results = json.testResults.flatMap((file) => file.assertionResults);
    const failed = [
      ...json.testResults
        .filter((file) => file.status === "failed" && file.assertionResults.length === 0)
        .map((file) => `${file.name}: ${file.message ?? "failed"}`),
      ...results.filter((r) => r.status === "failed").map((r) => r.fullName),
    ];
    return {
      files: json.testResults.length,
      passed: results.filter((r) => r.status === "passed").length,
      passedNames: results.filter((r) => r.status === "passed").map((r) => r.fullName),
      failed,
      skipped: results.filter((r) => r.status === "skipped" || r.status === "pending" || r.status === "todo").length,
      // The JSON reporter prints only where its report went: a failure's own messages say why.
      output: [
        output,
        ...results.filter((r) => r.status === "failed").map((r) => `${r.fullName}:\n${(r.failureMessages ?? []).join("\n").slice(0, 3000)}`),
      ].join("\n"),
    };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
