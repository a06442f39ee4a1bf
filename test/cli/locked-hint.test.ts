import { join } from "pathe";
import { describe, expect, it } from "vitest";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";
import { serveQueues } from "../../adapters/server";
import { cli, STACK, startCli, until } from "./_cli";

const tempDir = useTempDirs("vq-cli-locked-");

describe("E_LOCKED in direct mode: the hint names the holder's server, or says it is not known", () => {
  it("a server holds the queue: its own URL, not the default port", async () => {
    const dir = join(await tempDir(), "d");
    const server = await serveQueues({ dir, port: 0, durability: "none", logger: { error: () => {}, warn: () => {} } });
    try {
      // The server opens the queue's writer, and keeps it.
      expect((await cli(["push", "q", "a", "--url", server.url])).code).toBe(0);
      const run = await cli(["push", "q", "b", "--dir", dir]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`A server serves this directory at ${server.url}: go through it with --url ${server.url}`);
      expect(run.stderr).not.toMatch(STACK);
    } finally {
      await server.close();
    }
  });

  it("another process holds it, and a server that was killed had served the directory: not known, no URL guessed", async () => {
    const root = await tempDir();
    const dir = join(root, "d");
    // A server on the directory, killed without a chance to say it stopped.
    const serving = startCli(["serve", "--port", "0", "--dir", dir], { cwd: root });
    try {
      await until(serving.output, (r) => (r.stdout + r.stderr).includes("serving"));
    } finally {
      serving.child.kill("SIGKILL");
      await serving.exited;
    }
    await cli(["push", "q", "a", "--dir", dir]);
    const holder = startChild("hold-writer", dir, "q");
    try {
      await holder.waitFor((line) => line === "ready");
      const run = await cli(["push", "q", "b", "--dir", dir]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain("Its holder is not known");
      expect(run.stderr).not.toMatch(/http:\/\//);
      expect(run.stderr).not.toMatch(STACK);
    } finally {
      holder.process.kill("SIGKILL");
      await holder.exited;
    }
  });
});
