import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { useTempDirs } from "../helpers/tmp";
import { cli, STACK, useServer } from "./_cli";
import { sleep } from "../helpers/sleep";

const freshDir = useTempDirs("vq-cli-push-extras-");

async function bodies(dir: string, queue: string): Promise<string[]> {
  const c = await QueueConsumer.open(queue, `c${Math.random()}`.slice(0, 12), { driver: fsDriver({ dir }), onProblem: () => {} });
  const out = (await c.read({ max: 100 })).map((m) => m.data as string);
  await c.close();
  return out;
}

describe("v-queue push --delay / --at / --key", () => {
  it("direct: --delay keeps the messages aside until due (moved by the next writer), --key pushes once", async () => {
    const dir = await freshDir();
    // Due after the two pushes below, however long a loaded machine takes to start them.
    const delayed = await cli(["push", "q", "later", "--delay", "10s", "--dir", dir]);
    const due = Date.now() + 10_000;
    expect(delayed.code, delayed.stderr).toBe(0);
    expect(delayed.stdout + delayed.stderr).toMatch(/delayed until \d{4}-/);
    for (let i = 0; i < 2; i++) expect((await cli(["push", "q", "once", "--key", "k1", "--dir", dir])).code).toBe(0);
    expect(await bodies(dir, "q")).toEqual(["once"]);
    await sleep(due - Date.now() + 100);
    // The next push opens the writer, which moves what is due first.
    expect((await cli(["push", "q", "last", "--dir", dir])).code).toBe(0);
    expect(await bodies(dir, "q")).toEqual(["once", "later", "last"]);
  }, 45_000);

  it("direct: --priority, --max-deliveries and --backoff give the messages attributes; bad ones say what is allowed", async () => {
    const dir = await freshDir();
    expect((await cli(["push", "q", "a", "b", "--dir", dir])).code).toBe(0);
    const run = await cli(["push", "q", "urgent", "--priority", "9", "--max-deliveries", "2", "--backoff", "exponential:1s", "--dir", dir]);
    expect(run.code, run.stderr).toBe(0);
    const shared = await SharedConsumer.open("q", "w", { driver: fsDriver({ dir }), onProblem: () => {} });
    expect((await shared.poll({ max: 3, timeoutMs: 0 })).map((m) => [m.data, m.priority])).toEqual([
      ["urgent", 9],
      ["a", undefined],
      ["b", undefined],
    ]);
    await shared.close();
    for (const [flag, value, said] of [
      ["--priority", "300", /--priority 300: use an integer from 0/],
      ["--max-deliveries", "none", /--max-deliveries "none"/],
      ["--backoff", "linear:5", /"fixed" or "exponential"/],
      ["--backoff", "soon", /fixed:<time> or exponential:<time>/],
    ] as const) {
      const bad = await cli(["push", "q", "x", flag, value, "--dir", dir]);
      expect(bad.code, `${flag} ${value}`).not.toBe(0);
      expect(bad.stderr, `${flag} ${value}`).toMatch(said);
    }
  }, 45_000);

  const server = useServer(freshDir);
  it("over HTTP: --at and --key go to the server", async () => {
    const at = new Date(Date.now() + 60_000).toISOString();
    const run = await cli(["push", "h", "x", "--at", at, "--url", server.url]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).toContain(`delayed until ${at}`);
    for (let i = 0; i < 2; i++) expect((await cli(["push", "h", "y", "--key", "k", "--url", server.url])).code).toBe(0);
    const info = (await (await fetch(`${server.url}/api/v1/queues/h`)).json()) as { messages: number };
    expect(info.messages).toBe(1);
  }, 30_000);

  it("refuses bad values with one clear line", async () => {
    const dir = await freshDir();
    for (const [args, text] of [
      [["--delay", "soon"], "Invalid --delay"],
      [["--delay", "2s", "--at", "1"], "not both"],
      [["--at", "someday"], "Invalid --at"],
      [["--key", "x".repeat(300)], "Invalid --key"],
    ] as const) {
      const run = await cli(["push", "q", "m", ...args, "--dir", dir]);
      expect(run.code, args.join(" ")).not.toBe(0);
      expect(run.stderr, args.join(" ")).toContain(text);
      expect(run.stderr).not.toMatch(STACK);
    }
  }, 30_000);
});
