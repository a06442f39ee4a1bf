import { describe, expect, it } from "vitest";
import { startServer } from "../http/_server";
import { useTempDirs } from "../helpers/tmp";
import { cli } from "./_cli";
import fsDriver from "../../adapters/drivers/fs";
import { PartitionedWriter } from "../../src/writer/partitioned";

const tempDir = useTempDirs("vq-cli-prune-");

/** Three pushes: each CLI push opens the writer anew, so each starts a part (0, 1, 2). */
async function threeParts(target: string[]): Promise<void> {
  for (const text of ["a", "b", "c"]) expect((await cli(["push", "q", text, ...target])).code).toBe(0);
}

describe("v-queue prune", () => {
  it("a partitioned queue: the limits apply to each partition, and each partition's deletions are said (on the files and through a server)", async () => {
    const dir = await tempDir();
    await cli(["create", "p", "--partitions", "2", "--dir", dir]);
    // Parts of 1 KiB: a part per message.
    const writer = await PartitionedWriter.open("p", { driver: fsDriver({ dir }), maxPartBytes: 1024, durability: "none" });
    for (const text of ["a", "b", "c"]) await writer.produce([text.repeat(1000)], { partitionKey: "k" });
    await writer.close();
    const run = await cli(["prune", "p", "--max-parts", "2", "--dir", dir]);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/Deleted 1 part of "p\.p\d" \(0\): 1 message, 1,?025 bytes\./);
    expect((await cli(["prune", "p", "--max-parts", "2", "--dir", dir])).stderr).toContain('Nothing to delete in "p"');
    const s = await startServer({ dir });
    const over = await cli(["prune", "p", "--max-parts", "1", "--url", s.url]);
    await s.close();
    expect(over.stderr).toMatch(/Deleted 1 part of "p\.p\d" \(1\)/);
  });

  it("deletes the oldest parts past the limits on the files, and says what it deleted", async () => {
    const dir = await tempDir();
    await threeParts(["--dir", dir]);
    expect((await cli(["seek", "q", "early", "earliest", "--dir", dir])).code).toBe(0); // a consumer that has read nothing yet
    const none = await cli(["prune", "q", "--dir", dir]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("Give at least one limit");
    const run = await cli(["prune", "q", "--max-parts", "2", "--max-age", "30d", "--dir", dir]);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(`Deleted 1 part of "q" (0): 1 message, 26 bytes.`);
    expect((await cli(["prune", "q", "--max-bytes", "1G", "--dir", dir])).stderr).toContain("Nothing to delete");
    const bad = await cli(["prune", "q", "--max-age", "soon", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Invalid --max-age");
    // A consumer whose message was deleted is told, on a line of its own; a new one starts at the oldest left.
    const early = await cli(["consume", "q", "early", "--dir", dir]);
    expect(early.stdout).toBe("b\nc\n");
    expect(early.stderr).toMatch(/MISSED in queue q: Consumer "early" missed 1 message: retention deleted it \(part 0\)/);
    const late = await cli(["consume", "q", "late", "--dir", dir]);
    expect(late.stdout).toBe("b\nc\n");
    expect(late.stderr).not.toContain("MISSED");
  });

  it("through --url: the server's retention or the flags, and a consumer that missed messages is told", async () => {
    const s = await startServer({ queues: { q: { retention: { maxParts: 2 } } } });
    await threeParts(["--dir", s.dir]);
    expect((await cli(["consume", "q", "c", "--max", "1", "--url", s.url])).stdout).toBe("a\n");
    const run = await cli(["prune", "q", "--url", s.url]);
    expect(run.stderr).toContain(`Deleted 1 part of "q" (0)`);
    expect((await cli(["prune", "q", "--max-parts", "1", "--url", s.url])).stderr).toContain(`Deleted 1 part of "q" (1)`);
    const late = await cli(["consume", "q", "c", "--url", s.url]);
    expect(late.stdout).toBe("c\n");
    expect(late.stderr).toContain(`Consumer "c" missed 1 message of "q"`);
  });

  it("seek time:<ISO date> on the files", async () => {
    const dir = await tempDir();
    await threeParts(["--dir", dir]);
    expect((await cli(["seek", "q", "c", `time:${new Date(Date.now() - 60_000).toISOString()}`, "--dir", dir])).code).toBe(0);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("a\nb\nc\n");
    expect((await cli(["seek", "q", "c", "time:2100-01-01T00:00:00Z", "--dir", dir])).code).toBe(0);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("");
    const bad = await cli(["seek", "q", "c", "time:someday", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Invalid time");
  });
});
