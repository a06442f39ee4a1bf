import { existsSync, readdirSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";
import { cli, useServer, STACK } from "./_cli";

const tempDir = useTempDirs("vq-cli-read-only-");
const lines = (text: string) => text.split("\n").filter(Boolean);

async function pushTo(dir: string, queue: string, messages: string[]): Promise<void> {
  const writer = await QueueWriter.open(queue, { driver: fsDriver({ dir }), durability: "none" });
  await writer.pushBatch(messages);
  await writer.close();
}

/** The files that name `consumer` (its saved position, its lock), in any queue or partition. */
const filesOf = (dir: string, consumer: string) => readdirSync(dir).filter((name) => name.includes(`_${consumer}`));

// Each test runs the CLI several times: minutes on a loaded machine, not the 30 s default.
const SLOW = { timeout: 180_000 };

describe("reading creates nothing", SLOW, () => {
  it("consume and tail on a data directory that is not there fail clearly and do not make it", async () => {
    const typo = join(await tempDir(), "typo", "path");
    for (const args of [
      ["consume", "q", "c"],
      ["consume", "q", "c", "--no-commit"],
      ["tail", "q", "--max", "1"],
    ]) {
      const run = await cli([...args, "--dir", typo]);
      expect(run.code, args.join(" ")).toBe(1);
      expect(run.stderr).toContain('Queue "q" does not exist');
      expect(run.stderr).not.toMatch(STACK);
      expect(existsSync(typo), args.join(" ")).toBe(false);
    }
  });

  it("a consumer opened on a queue that is not there makes no file, nor the fs driver's directory", async () => {
    const dir = join(await tempDir(), "missing");
    await expect(QueueConsumer.open("nope", "c", { driver: fsDriver({ dir }) })).rejects.toMatchObject({ code: "E_NOT_FOUND" });
    expect(existsSync(dir)).toBe(false);
  });
});

describe("consume --no-commit (a peek) leaves no consumer", SLOW, () => {
  it("under a new name on the files: it prints from the start and keeps no position or lock", async () => {
    const dir = await tempDir();
    await pushTo(dir, "q", ["a", "b", "c"]);
    const peek = await cli(["consume", "q", "peeker", "--no-commit", "--max", "2", "--dir", dir]);
    expect(peek.code).toBe(0);
    expect(lines(peek.stdout)).toEqual(["a", "b"]);
    expect(filesOf(dir, "peeker")).toEqual([]);
    const stat = await cli(["stat", "q", "--dir", dir]);
    expect(stat.stdout).not.toContain("peeker");
    // A consumer that exists keeps its position through a peek.
    await cli(["consume", "q", "kept", "--max", "1", "--dir", dir]);
    expect(lines((await cli(["consume", "q", "kept", "--no-commit", "--dir", dir])).stdout)).toEqual(["b", "c"]);
    expect(lines((await cli(["consume", "q", "kept", "--dir", dir])).stdout)).toEqual(["b", "c"]);
  });

  it("under a new name on a partitioned queue: no partition keeps a position", async () => {
    const dir = await tempDir();
    expect((await cli(["create", "events", "--partitions", "3", "--dir", dir])).code).toBe(0);
    for (const key of ["a", "b", "c"]) await cli(["push", "events", `${key}1`, "--partition-key", key, "--dir", dir]);
    const peek = await cli(["consume", "events", "peeker", "--no-commit", "--dir", dir]);
    expect(peek.code).toBe(0);
    expect(lines(peek.stdout).sort()).toEqual(["a1", "b1", "c1"]);
    expect(filesOf(dir, "peeker")).toEqual([]);
  });

  describe("through a server (--url)", () => {
    const server = useServer(tempDir);

    it("under a new name: the server's consumer goes when the peek ends; an existing one stays where it was", async () => {
      for (const body of ["a", "b"]) await fetch(`${server.url}/api/v1/queues/jobs/messages`, { method: "POST", body });
      const names = async () =>
        ((await (await fetch(`${server.url}/api/v1/queues/jobs/consumers`)).json()) as { consumers: { name: string }[] }).consumers.map((c) => c.name);
      const peek = await cli(["consume", "jobs", "peeker", "--no-commit", "--url", server.url]);
      expect(peek.code, peek.stderr).toBe(0);
      expect(lines(peek.stdout)).toEqual(["a", "b"]);
      expect(await names()).not.toContain("peeker");
      await cli(["consume", "jobs", "kept", "--max", "1", "--url", server.url]);
      expect(lines((await cli(["consume", "jobs", "kept", "--no-commit", "--url", server.url])).stdout)).toEqual(["b"]);
      expect(await names()).toContain("kept");
      expect(lines((await cli(["consume", "jobs", "kept", "--url", server.url])).stdout)).toEqual(["b"]);
    });
  });
});
