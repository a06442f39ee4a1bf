import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
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
