/**
 * The README's first two examples run as written (only the server's port changes): the worker
 * against a real server, and the log read by a named consumer, which resumes after its commit.
 * They import `v-queue/client` and `v-queue` as a user's script in the clone does (the package
 * by its own name, so dist/: run `npm run build` first), each in its own Node process.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { promisify } from "node:util";
import { join, resolve } from "pathe";
import { afterAll, describe, expect, it } from "vitest";
import { useServer } from "../cli/_cli";
import { projectFile } from "../helpers/readme";
import { startScript } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");

/** The README's `js` code blocks, in order. */
const examples = [...projectFile("README.md").matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);

/** Scripts live under the project (git-ignored .tmp/), where `v-queue` resolves to the package itself. */
mkdirSync(join(ROOT, ".tmp"), { recursive: true });
const scripts = mkdtempSync(join(ROOT, ".tmp", "readme-"));
afterAll(() => rmSync(scripts, { recursive: true, force: true }));

function script(name: string, source: string): string {
  const path = join(scripts, name);
  writeFileSync(path, source);
  return path;
}

describe("the README's examples", () => {
  const tempDir = useTempDirs("vq-readme-");
  const server = useServer(tempDir);

  it("shows a worker first (within a screen), then a log, both in JavaScript", () => {
    const firstScreen = projectFile("README.md").split("\n").slice(0, 45).join("\n");
    expect(firstScreen).toContain("npx v-queue serve");
    expect(firstScreen).toContain('vq.worker("emails", "senders"');
    expect(examples).toHaveLength(2);
    expect(examples[0]).toContain('vq.worker("emails", "senders"');
    expect(examples[1]).toContain('openConsumer("events", "audit")');
  });

  it("the worker handles every message produced, and stops on SIGINT", { timeout: 60_000 }, async () => {
    expect(examples[0]).toContain('"http://127.0.0.1:9093"');
    const worker = startScript(script("worker.mjs", examples[0]!.replace('"http://127.0.0.1:9093"', JSON.stringify(server.url))));
    await worker.waitFor((line) => line === "sending to ada@example.com", 30_000);
    await worker.waitFor((line) => line === "sending to alan@example.com", 30_000);
    worker.process.kill("SIGINT");
    expect(await worker.exited).toBe(0);
    expect(worker.lines.filter((line) => line.startsWith("sending to"))).toHaveLength(2);
  });

  it("the log's consumer reads what was pushed, and a second run resumes after its commit", { timeout: 60_000 }, async () => {
    const path = script("log.mjs", examples[1]!);
    const cwd = tempDir(); // the example's default data directory is ./queues
    const first = await run(process.execPath, [path], { cwd });
    expect(first.stdout).toBe('{"type":"signup","user":7}\n{"type":"login","user":7}\n');
    // Two more pushed; "audit" prints only those, not the first two again.
    const second = await run(process.execPath, [path], { cwd });
    expect(second.stdout).toBe(first.stdout);
  });
});
