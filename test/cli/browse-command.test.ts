import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { listConsumers } from "../../src/inspect/queues";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";
import { cli, STACK, useServer } from "./_cli";

const tempDir = useTempDirs("vq-cli-browse-");

/** Text, a JSON object and bytes in queue "q". */
async function fill(dir: string): Promise<void> {
  const q = await QueueWriter.open("q", { driver: fsDriver({ dir }), durability: "none" });
  await q.pushBatch(["plain text", '{"a":[1,2]}', new Uint8Array([0, 1, 171, 255])]);
  await q.close();
}

const EXPECTED = 'plain text\n\n0:2 offset 35 json\n{\n  "a": [\n    1,\n    2\n  ]\n}\n\n0:3 offset 71 bytes (4)\n00 01 ab ff\n\n';

describe("v-queue browse", () => {
  it("prints a page of the files without consuming: text as text, JSON pretty, bytes as hex; says the next page", async () => {
    const dir = await tempDir();
    await fill(dir);
    const all = await cli(["browse", "q", "--dir", dir]);
    expect(all.code).toBe(0);
    expect(all.stdout).toBe(`0:1 offset 0 text\n${EXPECTED}`);
    expect(all.stderr).toContain('3 messages of "q", to the end.');
    const first = await cli(["browse", "q", "--limit", "1", "--dir", dir]);
    expect(first.stdout).toBe("0:1 offset 0 text\nplain text\n\n");
    const next = /--from (\S+)\./.exec(first.stderr)![1]!;
    expect((await cli(["browse", "q", "--from", next, "--limit", "1", "--dir", dir])).stdout).toMatch(/^0:2 offset 35 json\n/);
    expect((await cli(["browse", "q", "--from", "latest", "--limit", "1", "--dir", dir])).stdout).toMatch(/^0:3 offset 71 bytes/);
    expect((await cli(["browse", "q", "--from", "0:2", "--limit", "1", "--dir", dir])).stdout).toMatch(/^0:2 /);
    expect(await listConsumers(fsDriver({ dir }), "q")).toEqual([]);
    const bad = await cli(["browse", "q", "--from", "yesterday", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Invalid target");
    expect(bad.stderr).not.toMatch(STACK);
    const missing = await cli(["browse", "nope", "--dir", dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Queue "nope" does not exist');
  });

  it("a partitioned queue: every partition in turn, each message saying its partition, or one with --partition", async () => {
    const dir = await tempDir();
    expect((await cli(["create", "p", "--partitions", "3", "--dir", dir])).code).toBe(0);
    for (const key of ["a", "b", "c", "d"]) expect((await cli(["push", "p", `${key}1`, `${key}2`, "--partition-key", key, "--dir", dir])).code).toBe(0);
    const all = await cli(["browse", "p", "--dir", dir]);
    expect(all.code).toBe(0);
    const heads = all.stdout.split("\n").filter((line) => / offset /.test(line));
    expect(heads.length).toBe(8);
    for (const head of heads) expect(head).toMatch(/^p[0-2] 0:[1-8] offset \d+ text$/);
    const one = await cli(["browse", "p", "--partition", "1", "--dir", dir]);
    expect(
      one.stdout
        .split("\n")
        .filter((line) => / offset /.test(line))
        .every((line) => line.startsWith("p1 ")),
    ).toBe(true);
    const bad = await cli(["browse", "p", "--partition", "3", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Invalid partition 3");
    expect(bad.stderr).not.toMatch(STACK);
  });

  describe("through a server (--url)", () => {
    const server = useServer(tempDir);
    it("prints the same", async () => {
      await fill(server.dir);
      const run = await cli(["browse", "q", "--url", server.url]);
      expect(run.code).toBe(0);
      expect(run.stdout).toBe(`0:1 offset 0 text\n${EXPECTED}`);
      const over = await cli(["browse", "q", "--limit", "5000", "--url", server.url]);
      expect(over.code).toBe(1);
      expect(over.stderr).toContain("--limit");
    });
  });
});
