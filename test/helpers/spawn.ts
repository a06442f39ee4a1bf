import { spawn, type ChildProcess } from "node:child_process";
import { resolve } from "pathe";
import { scriptCommand } from "./runtime";

const CHILD = resolve(import.meta.dirname, "child.ts");

export interface Child {
  process: ChildProcess;
  lines: string[];
  /** Resolves once a line satisfying `predicate` has been printed. */
  waitFor(predicate: (line: string) => boolean, timeoutMs?: number): Promise<string>;
  exited: Promise<number | null>;
}

/** Starts test/helpers/child.ts in its own process of the current runtime. */
export function startChild(...args: string[]): Child {
  return startScript(CHILD, ...args);
}

/** Starts a TypeScript file in its own process of the current runtime (Node through jiti), collecting its stdout lines. */
export function startScript(script: string, ...args: string[]): Child {
  const { command, args: argv } = scriptCommand(script, args);
  const child = spawn(command, argv, { stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let partial = "";
  let stderr = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
    const parts = (partial + chunk).split("\n");
    partial = parts.pop()!;
    lines.push(...parts);
    for (const waiter of waiters) waiter();
  });
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  return {
    process: child,
    lines,
    exited,
    waitFor(predicate, timeoutMs = 20_000) {
      return new Promise((done, fail) => {
        const check = () => {
          const line = lines.find(predicate);
          if (line === undefined) return;
          cleanup();
          done(line);
        };
        const timer = setTimeout(() => {
          cleanup();
          fail(new Error(`child printed no matching line in ${timeoutMs} ms; stderr: ${stderr}`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        void exited.then(() => {
          if (waiters.has(check)) {
            check();
            if (waiters.has(check)) {
              cleanup();
              fail(new Error(`child exited; stderr: ${stderr}`));
            }
          }
        });
        waiters.add(check);
        check();
      });
    },
  };
}
