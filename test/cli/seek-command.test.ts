import { describe, expect, it } from "vitest";
import { startServer } from "../http/_server";
import { useTempDirs } from "../helpers/tmp";
import { partitionOfKey } from "../../src/partitions/declaration";
import { cli } from "./_cli";

const tempDir = useTempDirs("vq-cli-seek-");

describe("v-queue seek", () => {
  it("moves a consumer on the files and through --url; a bad target is one line and exit 1", async () => {
    const dir = await tempDir();
    expect((await cli(["push", "q", "a", "b", "c", "--dir", dir])).code).toBe(0);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("a\nb\nc\n");
    const moved = await cli(["seek", "q", "c", "0:2", "--dir", dir]);
    expect(moved.code).toBe(0);
    expect(moved.stderr).toContain("is now at 0.26.1");
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("b\nc\n");
    expect((await cli(["seek", "q", "c", "earliest", "--dir", dir])).code).toBe(0);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("a\nb\nc\n");

    const bad = await cli(["seek", "q", "c", "nowhere", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Invalid target");
    expect(bad.stderr).not.toMatch(/\n\s+at /);
    const missing = await cli(["seek", "q", "c", "0:9", "--dir", dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no such message");

    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.post("/api/v1/queues/q/messages", "y");
    expect((await cli(["consume", "q", "c", "--url", s.url])).stdout).toBe("x\ny\n");
    expect((await cli(["seek", "q", "c", "0:2", "--url", s.url])).code).toBe(0);
    expect((await cli(["consume", "q", "c", "--url", s.url])).stdout).toBe("y\n");
  });

  it("on a partitioned queue: moves every partition, asking the server that reads them to hand them over, or those a composite cursor names", async () => {
    const s = await startServer({ queues: { orders: { partitions: 2 } } });
    const keys = ["k0", "k1", "k2", "k3", "k4", "k5"];
    expect(new Set(keys.map((key) => partitionOfKey(key, 2))).size).toBe(2);
    for (const key of keys) expect((await s.post("/api/v1/queues/orders/messages", key, { "partition-key": key })).status).toBe(201);
    const lines = (text: string) => text.split("\n").filter(Boolean).sort();
    expect(lines((await cli(["consume", "orders", "c", "--url", s.url])).stdout)).toEqual(keys);
    // The server holds both partitions of "c" (it read them): the seek takes them from it, through the files.
    const moved = await cli(["seek", "orders", "c", "earliest", "--dir", s.dir]);
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stderr).toMatch(/is now at p0:0\.0\.0,p1:0\.0\.0/);
    expect(lines((await cli(["consume", "orders", "c", "--url", s.url])).stdout)).toEqual(keys);
    expect((await cli(["seek", "orders", "c", "latest", "--url", s.url])).code).toBe(0);
    expect((await cli(["consume", "orders", "c", "--url", s.url])).stdout).toBe("");
    // A target of an ordinary queue is refused, saying what a partitioned one takes.
    const bad = await cli(["seek", "orders", "c", "0:1", "--dir", s.dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("partitioned");
    expect(bad.stderr).not.toMatch(/\n\s+at /);
  });
});
