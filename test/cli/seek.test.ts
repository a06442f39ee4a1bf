import { describe, expect, it } from "vitest";
import { startServer } from "../http/_server";
import { useTempDirs } from "../helpers/tmp";
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
});
