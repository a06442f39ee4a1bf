/**
 * Which JavaScript runtime runs the tests, and how to start a script in a given runtime. The test
 * files also run on Bun and Deno (test/runtimes): their child processes (crash tests, servers under
 * `ulimit`) must start in the same runtime, each with its own command line.
 */
import { toolBinary } from "./tools";

export type Runtime = "node" | "bun" | "deno";

export const RUNTIMES: readonly Runtime[] = ["node", "bun", "deno"];

export const currentRuntime: Runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";

/**
 * Deno's node:child_process takes any `kill()` for the end of the child: after a SIGSTOP it
 * passes on no more of its output (and reports a child that caught SIGTERM as killed). Tests
 * that pause a child and read it again cannot run there.
 */
export const SIGNALS_END_CHILD = currentRuntime === "deno";

/** The permissions `v-queue serve` and the library need on Deno (docs/runtimes.md#runtimes). */
export const DENO_FLAGS = ["--allow-read", "--allow-write", "--allow-net", "--allow-env", "--allow-sys", "--allow-run"];

/** A runtime's binary: this process's own, `node`, or Bun's or Deno's from ./tools (installed on first use). */
export function runtimeBinary(runtime: Runtime): string {
  if (runtime === currentRuntime) return process.execPath;
  if (runtime === "node") return "node";
  return toolBinary(runtime);
}

/**
 * The command line that runs `script` on `runtime`: TypeScript sources through jiti on Node and
 * natively on Bun and Deno (Deno with `--sloppy-imports`, as the sources import without
 * extensions); built `.mjs` files (the CLI) as they are.
 */
export function scriptCommand(script: string, args: string[] = [], runtime: Runtime = currentRuntime): { command: string; args: string[] } {
  const typescript = script.endsWith(".ts");
  const command = runtimeBinary(runtime);
  if (runtime === "deno") return { command, args: ["run", ...DENO_FLAGS, ...(typescript ? ["--sloppy-imports"] : []), script, ...args] };
  if (runtime === "node" && typescript) return { command, args: ["--import", "jiti/register", script, ...args] };
  return { command, args: [script, ...args] };
}
