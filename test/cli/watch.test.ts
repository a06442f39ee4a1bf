import { spawn, spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { serveQueues } from "../../adapters/server";
import { createClient } from "../../client/index";
import { useTempDirs } from "../helpers/tmp";
import { ANSI, BIN, cli, STACK, startCli, until, type CliRun } from "./_cli";

const tempDir = useTempDirs("vq-cli-watch-");

/** The blocks printed so far into a pipe: a timestamp line, then the table. */
function blocks(stdout: string): { at: string; lines: string[] }[] {
  // The last piece is a block still being written (or nothing).
  return stdout
    .split("\n\n")
    .slice(0, -1)
    .map((block) => {
      const [at, ...lines] = block.trim().split("\n");
      return { at: at!, lines };
    });
}

/** The cells of queue `name`'s row in a block: [name, messages, bytes (2 cells), parts, produce/s, consume/s, lag, consumer]. */
function row(block: { lines: string[] }, name: string): string[] | undefined {
  return block.lines.find((line) => line.startsWith(`${name} `))?.split(/\s+/);
}

const hasScript = spawnSync("script", ["--version"]).status === 0;

describe("v-queue stat --watch", () => {
  it("into a pipe, on the files: one timestamped block per sample, no escape code; rates follow what is produced meanwhile; Ctrl-C exits 0", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "b", "--dir", dir]);
    const run = startCli(["stat", "--watch", "--interval", "200ms", "--dir", dir]);
    try {
      await until(run.output, (r) => blocks(r.stdout).length >= 2);
      const first = blocks(run.output().stdout)[0]!;
      expect(first.at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(first.lines[0]).toMatch(/^QUEUE\s+MESSAGES\s+BYTES\s+PARTS\s+PRODUCE\/S\s+CONSUME\/S\s+WORST LAG\s+CONSUMER$/);
      expect(row(first, "q")?.slice(0, 2)).toEqual(["q", "2"]);
      expect(row(first, "q")?.[5]).toBe("0");

      // Another process writes while it watches (the watch holds no lock).
      await cli(["push", "q", "c", "d", "e", "--dir", dir]);
      const moved = await until(run.output, (r) => blocks(r.stdout).some((b) => row(b, "q")?.[1] === "5" && Number(row(b, "q")?.[5]) > 0));
      const samples = blocks(moved.stdout);
      expect(new Set(samples.map((b) => b.at)).size).toBe(samples.length); // a new sample each time

      // A consumer reading: the consume rate and the worst lag follow.
      await cli(["consume", "q", "reader", "--max", "1", "--dir", dir]);
      await until(run.output, (r) => blocks(r.stdout).some((b) => row(b, "q")?.[7] === "4" && row(b, "q")?.[8] === "reader"));
      await cli(["consume", "q", "reader", "--max", "3", "--dir", dir]);
      await until(run.output, (r) => blocks(r.stdout).some((b) => row(b, "q")?.[7] === "1" && row(b, "q")?.[8] === "reader" && Number(row(b, "q")?.[6]) > 0));

      run.child.kill("SIGINT");
      const done = await run.exited;
      expect(done.code).toBe(0);
      expect(done.stdout).not.toMatch(ANSI);
    } finally {
      run.child.kill("SIGKILL");
    }
  });

  it("through --url with a queue: its consumers (kind, position, lag, rate), from the server's overview", async () => {
    const dir = await tempDir();
    const server = await serveQueues({ dir, port: 0, durability: "none", logger: { error: () => {}, warn: () => {} } });
    const client = createClient({ baseURL: server.url });
    const run = startCli(["stat", "jobs", "--watch", "--interval", "300ms", "--url", server.url]);
    try {
      await until(run.output, (r) => r.stdout.includes('Queue "jobs" does not exist (yet).'));
      await client.produce("jobs", ["1", "2", "3", "4"]);
      const got = await client.consume("jobs", "worker", { maxMessages: 1 });
      await client.commit("jobs", "worker", got.cursor);
      await until(run.output, (r) => /^worker\s+ordered\s+part 0 @ \d+\s+3\s+\S+\s+-$/m.test(r.stdout));
      // What a sample saw come after the last: a produce rate (the first sight of a queue counts nothing).
      await client.produce("jobs", ["5", "6"]);
      await until(run.output, (r) => blocks(r.stdout).some((b) => row(b, "jobs")?.[1] === "6" && Number(row(b, "jobs")?.[5]) > 0));
      run.child.kill("SIGINT");
      expect((await run.exited).code).toBe(0);
    } finally {
      run.child.kill("SIGKILL");
      await server.close();
    }
  });

  it.skipIf(!hasScript)("on a terminal (a pty from script(1), Ctrl-C typed into it): redrawn in place, cursor hidden then shown again, exit 0", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "--dir", dir]);
    // `exec`: script(1) runs the command through $SHELL -c, and a shell that stays (dash does) is
    // in the terminal's foreground group too: the Ctrl-C would kill it, and script report 130.
    const command = `exec ${[process.execPath, BIN, "stat", "--watch", "--interval", "200ms", "--dir", dir].map((a) => `'${a}'`).join(" ")}`;
    const child = spawn("script", ["-qefc", command, "/dev/null"], {
      env: { ...process.env, SHELL: "/bin/sh", TERM: "xterm", COLUMNS: "100", LINES: "30" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c));
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    const read = (): CliRun => ({ code: child.exitCode, stdout, stderr: "" });
    try {
      await until(read, (r) => r.stdout.split("\u001b[H").length > 3);
      child.stdin.write("\u0003"); // Ctrl-C, as the terminal sends it
      expect(await exited).toBe(0);
      expect(stdout.startsWith("\u001b[?25l\u001b[2J")).toBe(true);
      // Each frame from the top left, each line cleared to its end, the rest below cleared.
      const frames = stdout.split("\u001b[H").slice(1);
      expect(frames.length).toBeGreaterThanOrEqual(3);
      for (const frame of frames.slice(0, -1)) {
        expect(frame).toMatch(/^v-queue stat --watch .* every 0\.2s/);
        // eslint-disable-next-line no-control-regex
        expect(frame).toMatch(/\nq +1 +26 B +1 .*\u001b\[K/);
        expect(frame.trimEnd().endsWith("\u001b[J")).toBe(true);
      }
      expect(stdout.trimEnd().endsWith("\u001b[?25h")).toBe(true);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("refuses a bad --interval, and --interval without --watch, with exit 1 and a clear message", async () => {
    const dir = await tempDir();
    for (const [args, message] of [
      [["--interval", "2"], 'Invalid --interval "2": use a duration with its unit, such as 500ms, 30s, 5m or 1h'],
      [["--interval", "50ms"], 'Invalid --interval "50ms": at least 100ms.'],
      [["--interval", "0"], 'Invalid --interval "0": at least 100ms.'],
      [["--interval", "2h"], 'Invalid --interval "2h": use a duration'],
      [["--interval", "fast"], 'Invalid --interval "fast"'],
    ] as const) {
      const run = await cli(["stat", "--watch", ...args, "--dir", dir]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain(message);
      expect(run.stderr).not.toMatch(STACK);
      expect(run.stdout).toBe("");
    }
    const alone = await cli(["stat", "--interval", "1s", "--dir", dir]);
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain("--interval goes with --watch.");
  });
});
