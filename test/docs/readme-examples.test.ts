/**
 * The README's first two examples run as written (only the server's port changes): the worker
 * against a real server, and the log read by a named consumer, which resumes after its commit.
 * They import `v-queue/client` and `v-queue` as a user's script in the clone does (dist/: run
 * `npm run build` first).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useServer } from "../cli/_cli";
import { codeBlocks, pointed, runUntil, useScripts } from "../helpers/doc-scripts";
import { projectFile } from "../helpers/readme";
import { useTempDirs } from "../helpers/tmp";

const run = promisify(execFile);
// The README's own programs; BullMQ's twin of the worker (For BullMQ users) is BullMQ's, not run here.
const examples = codeBlocks("README.md", "js").filter((code) => !code.includes('from "bullmq"'));

describe("the README's examples", () => {
  const tempDir = useTempDirs("vq-readme-");
  const server = useServer(tempDir);
  const script = useScripts();

  it("shows a worker first (within a screen), then a log, both in JavaScript", () => {
    const firstScreen = projectFile("README.md").split("\n").slice(0, 45).join("\n");
    expect(firstScreen).toContain("npx v-queue serve");
    expect(firstScreen).toContain('vq.worker("emails", "senders"');
    expect(examples).toHaveLength(2);
    expect(examples[1]).toContain('openConsumer("events", "audit")');
  });

  it("the worker handles every message produced, and stops on SIGINT", { timeout: 60_000 }, async () => {
    const path = script("worker.mjs", pointed(examples[0]!, "http://127.0.0.1:9093", server.url));
    const { lines, code } = await runUntil(path, ["sending to ada@example.com", "sending to alan@example.com"], "SIGINT");
    expect(code).toBe(0);
    expect(lines.filter((line) => line.startsWith("sending to"))).toHaveLength(2);
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
