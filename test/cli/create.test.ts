import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { useTempDirs } from "../helpers/tmp";
import { partitionOfKey } from "../../src/partitions/declaration";
import { startServer } from "../http/_server";
import { cli, STACK } from "./_cli";

const tempDir = useTempDirs("vq-cli-create-");

describe("v-queue create <queue> --partitions P", () => {
  it("on the files: declares, again is a no-op, another count, an ordinary queue or a bad count is one clear error", async () => {
    const dir = await tempDir();
    const made = await cli(["create", "events", "--partitions", "6", "--dir", dir]);
    expect(made.code).toBe(0);
    expect(made.stderr).toContain('Declared "events" with 6 partitions.');
    expect(readFileSync(join(dir, "events_info_partitions"), "utf8")).toBe("v-queue partitions 6\n");
    expect((await cli(["create", "events", "--partitions", "6", "--dir", dir])).stderr).toContain('"events" is already declared with 6 partitions.');
    const other = await cli(["create", "events", "--partitions", "4", "--dir", dir]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("declared with 6 partitions; it cannot change to 4");
    await cli(["push", "plain", "x", "--dir", dir]);
    const ordinary = await cli(["create", "plain", "--partitions", "2", "--dir", dir]);
    expect(ordinary.code).toBe(1);
    expect(ordinary.stderr).toContain("exists as an ordinary queue");
    for (const bad of ["0", "1025", "two", "1.5"]) {
      const res = await cli(["create", "q", "--partitions", bad, "--dir", dir]);
      expect(res.code, bad).toBe(1);
      expect(res.stderr).toContain("Invalid --partitions");
      expect(res.stderr).not.toMatch(STACK);
    }
    expect(existsSync(join(dir, "q_info_partitions"))).toBe(false);
  });

  it("push --partition-key: on the files and through a server, to the key's partition; refused on an ordinary queue", async () => {
    const dir = await tempDir();
    await cli(["create", "events", "--partitions", "4", "--dir", dir]);
    expect((await cli(["push", "events", "a", "b", "--partition-key", "user-1", "--dir", dir])).code).toBe(0);
    const s = await startServer({ dir });
    expect((await cli(["push", "events", "c", "--partition-key", "user-1", "--url", s.url])).code).toBe(0);
    await s.close();
    const partition = partitionOfKey("user-1", 4);
    expect((await cli(["consume", `events.p${partition}`, "check", "--dir", dir])).stdout).toBe("a\nb\nc\n");
    await cli(["push", "plain", "x", "--dir", dir]);
    const refused = await cli(["push", "plain", "y", "--partition-key", "k", "--dir", dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Queue "plain" is not partitioned');
  });

  it("stat shows a partitioned queue as one, summed, with its partition count and each consumer's lag (on the files and through a server)", async () => {
    const dir = await tempDir();
    await cli(["create", "events", "--partitions", "3", "--dir", dir]);
    for (const key of ["a", "b", "c"]) await cli(["push", "events", `${key}1`, `${key}2`, "--partition-key", key, "--dir", dir]);
    await cli(["consume", "events", "reader", "--max", "2", "--dir", dir]);
    const files = await cli(["stat", "--dir", dir]);
    expect(files.stdout).toContain("events: 6 messages, ");
    expect(files.stdout).toContain(" in 3 partitions (each one: events.p<k>)");
    expect(files.stdout).toContain("consumer reader (ordered): lag 4");
    const s = await startServer({ dir });
    const http = await cli(["stat", "events", "--json", "--url", s.url]);
    await s.close();
    expect(JSON.parse(http.stdout)[0]).toMatchObject({ name: "events", messages: 6, partitions: 3, consumers: [{ name: "reader", lag: 4 }] });
  });

  it("with --url: through the server (admin right)", async () => {
    const s = await startServer();
    const made = await cli(["create", "events", "--partitions", "3", "--url", s.url]);
    expect(made.code).toBe(0);
    expect(made.stderr).toContain('Declared "events" with 3 partitions.');
    const other = await cli(["create", "events", "--partitions", "2", "--url", s.url]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("E_CONFLICT");
  });
});
