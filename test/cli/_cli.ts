/**
 * Runs the built CLI (`bin/v-queue.mjs`, which imports dist/: `npm run build` first) in its own
 * process, as a user would, with a clean colour environment.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll } from "vitest";
import { serveQueues, type QueueServer } from "../../adapters/server";
import { scriptCommand, type Runtime } from "../helpers/runtime";
import { sleep } from "../helpers/sleep";

export const BIN = fileURLToPath(new URL("../../bin/v-queue.mjs", import.meta.url));
const DIST = fileURLToPath(new URL("../../dist/cli.mjs", import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cleanEnv(env: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  // vitest sets TEST and may set CI / FORCE_COLOR: the CLI must decide on colour by itself.
  for (const key of ["NO_COLOR", "FORCE_COLOR", "TEST", "CI", "NODE_ENV", "CONSOLA_LEVEL", "VQUEUE_USER", "VQUEUE_DIR", "VQUEUE_PORT", "VQUEUE_USERS"])
    delete base[key];
  for (const key of Object.keys(base)) if (key.startsWith("VITEST")) delete base[key];
  return { ...base, ...env };
}

/** Starts the CLI (on Node unless told); the caller reads its output and waits for its exit. */
export function startCli(
  args: string[],
  options: { env?: Record<string, string | undefined>; cwd?: string; runtime?: Runtime } = {},
): { child: ChildProcess; output: () => CliRun; exited: Promise<CliRun> } {
  if (!existsSync(DIST)) throw new Error("Build first: npm run build (bin/v-queue.mjs imports dist/cli.mjs).");
  const { command, args: argv } = scriptCommand(BIN, args, options.runtime ?? "node");
  const child = spawn(command, argv, { cwd: options.cwd, env: cleanEnv(options.env ?? {}), stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (c: string) => (stdout += c));
  child.stderr!.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  // `code` is set once the output is complete too ("close", not "exit").
  let code: number | null = null;
  const output = (): CliRun => ({ code, stdout, stderr });
  const exited = new Promise<CliRun>((resolve) => child.once("close", (exitCode) => resolve({ code: (code = exitCode ?? -1), stdout, stderr })));
  return { child, output, exited };
}

/** Runs the CLI to its end (stdin: `input`, or closed). */
export function cli(args: string[], options: { env?: Record<string, string | undefined>; cwd?: string; input?: string | Uint8Array } = {}): Promise<CliRun> {
  const run = startCli(args, options);
  run.child.stdin!.end(options.input);
  return run.exited;
}

/** Waits until `predicate` holds for the output so far (fails once the process has exited without it). */
export async function until(read: () => CliRun, predicate: (run: CliRun) => boolean, timeoutMs = 20_000): Promise<CliRun> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = read();
    if (predicate(run)) return run;
    // Exited without it: no use waiting.
    if (Date.now() > deadline || run.code !== null)
      throw new Error(`${run.code === null ? "timed out" : `exited with ${run.code}`}; stdout: ${run.stdout}\nstderr: ${run.stderr}`);
    await sleep(25);
  }
}

/** No stack frame in the output: expected errors are one clear message. */
export const STACK = /^\s+at .+[:(]/m;
// eslint-disable-next-line no-control-regex
export const ANSI = /\u001b\[/;

/** A server (in this process) on a fresh data directory for the tests of a `describe`. */
export function useServer(tempDir: () => string): { dir: string; url: string } {
  const state = { dir: "", url: "", server: undefined as QueueServer | undefined };
  beforeAll(async () => {
    state.dir = tempDir();
    state.server = await serveQueues({ dir: state.dir, port: 0, durability: "none", logger: { error: () => {}, warn: () => {} } });
    state.url = state.server.url;
  });
  afterAll(() => state.server?.close());
  return state;
}
