import { describe, expect, it } from "vitest";
import { useTempDirs } from "../helpers/tmp";
import { cli, useServer } from "./_cli";

const freshDir = useTempDirs("vq-cli-push-replayed-");

/** Pushes `words` to `q` under key `k` twice: what each run said. */
async function twice(target: string[]): Promise<[string, string]> {
  const runs = [];
  for (let i = 0; i < 2; i++) {
    const run = await cli(["push", "q", "a", "b", "--key", "k", ...target]);
    expect(run.code, run.stderr).toBe(0);
    runs.push(run.stdout + run.stderr);
  }
  return runs as [string, string];
}

describe("v-queue push --key, run again", () => {
  it("direct: the second run says the messages were already pushed under the key, not that it pushed them", async () => {
    const [first, second] = await twice(["--dir", await freshDir()]);
    expect(first).toContain("Pushed 2 messages to q.");
    expect(second).toContain('2 messages to q: already pushed under key "k" (nothing written again).');
    expect(second).not.toContain("Pushed");
  });

  const server = useServer(freshDir);
  it("over HTTP: the same", async () => {
    const [first, second] = await twice(["--url", server.url]);
    expect(first).toContain("Pushed 2 messages to q.");
    expect(second).toContain('2 messages to q: already pushed under key "k" (nothing written again).');
    expect(second).not.toContain("Pushed");
  });

  it("a long input of which the first batch was pushed before: both counts", async () => {
    const dir = await freshDir();
    expect((await cli(["push", "q", "--stdin", "--batch", "2", "--key", "k", "--dir", dir], { input: "1\n2\n" })).code).toBe(0);
    const run = await cli(["push", "q", "--stdin", "--batch", "2", "--key", "k", "--dir", dir], { input: "1\n2\n3\n" });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout + run.stderr).toContain('Pushed 1 message to q; 2 messages already pushed under key "k" (nothing written again).');
  });
});
