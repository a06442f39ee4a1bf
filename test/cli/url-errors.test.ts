import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { useTempDirs } from "../helpers/tmp";
import { ANSI, STACK, cli, useServer } from "./_cli";

const tempDir = useTempDirs("vq-cli-url-");

/** A port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("--url errors: one line, exit 1, no stack", () => {
  const server = useServer(tempDir);

  it("an error answer of the server says its status, code and message", async () => {
    const run = await cli(["stat", "nope", "--url", server.url]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('The server answered 404 E_NOT_FOUND: Queue "nope" does not exist.');
    expect(run.stderr).not.toMatch(STACK);
    expect(run.stderr).not.toMatch(ANSI);
  });

  it("no answer says why (the system's reason, not fetch's)", async () => {
    const port = await closedPort();
    for (const args of [["stat"], ["push", "q", "m"], ["consume", "q", "c"], ["tail", "q"]]) {
      const run = await cli([...args, "--url", `http://127.0.0.1:${port}`]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(`No answer from the server: connect ECONNREFUSED 127.0.0.1:${port}`);
      expect(run.stderr).not.toMatch(STACK);
    }
  });
});
