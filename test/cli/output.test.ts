import { writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import { progressLine } from "../../adapters/commands/_shared";
import { useTempDirs } from "../helpers/tmp";
import { ANSI, cli, useServer } from "./_cli";

const tempDir = useTempDirs("vq-cli-out-");
const lines = (text: string) => text.split("\n").filter(Boolean);

describe("help", () => {
  it("has no colour codes when written to a pipe or a file, nor with NO_COLOR", async () => {
    for (const args of [["--help"], ["consume", "--help"], ["serve", "--help"], ["tail", "--help"]]) {
      const run = await cli(args);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain("USAGE");
      expect(run.stdout, args.join(" ")).not.toMatch(ANSI);
    }
    const withNoColor = await cli(["push", "--help"], { env: { NO_COLOR: "yes", FORCE_COLOR: "1" } });
    expect(withNoColor.stdout).not.toMatch(ANSI);
  });

  it("lists --commit/--no-commit once, and says that consume reads all there is", async () => {
    const { stdout } = await cli(["consume", "--help"]);
    expect(stdout.match(/--no-commit/g)).toHaveLength(1);
    expect(stdout.match(/^\s*--commit\b/gm)).toHaveLength(1);
    expect(stdout).toMatch(/all there are/);
    expect(stdout).toContain("base64:");
  });
});

describe("progress and counts", () => {
  it("says 1 message, 2 messages", async () => {
    expect(progressLine("push q", 1, 1)).toBe("push q: 1 message (1/s)");
    expect(progressLine("push q", 2000, 2)).toBe("push q: 2,000 messages (1,000/s)");
    const dir = await tempDir();
    expect((await cli(["push", "q", "one", "--dir", dir])).stderr).toContain("Pushed 1 message to q.");
    const consumed = await cli(["consume", "q", "c", "--dir", dir]);
    expect(consumed.stdout).toBe("one\n");
    expect(consumed.stderr).toContain("1 message from q as c, committed.");
  });
});

describe("bytes on the files", () => {
  it("push --file stores bytes; consume prints them as base64:..., --json as type object", async () => {
    const dir = await tempDir();
    const file = join(dir, "blob.bin");
    writeFileSync(file, new Uint8Array([0, 1, 255]));
    expect((await cli(["push", "q", "--file", file, "--dir", dir])).code).toBe(0);
    expect((await cli(["push", "q", "base64:not-bytes", "--dir", dir])).code).toBe(0);
    expect(lines((await cli(["consume", "q", "c", "--dir", dir, "--no-commit"])).stdout)).toEqual(["base64:AAH/", "base64:not-bytes"]);
    const [bytes, text] = lines((await cli(["consume", "q", "c", "--dir", dir, "--json"])).stdout).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(bytes).toMatchObject({ type: "object", data: "AAH/", encoding: "base64" });
    expect(text).toMatchObject({ type: "string", data: "base64:not-bytes" });
  });
});

describe("stat --json", () => {
  const server = useServer(tempDir);

  it("has one shape on the files and through --url", async () => {
    await fetch(`${server.url}/api/v1/queues/orders/messages`, {
      method: "POST",
      body: JSON.stringify({ messages: ["a", "b", "c"] }),
      headers: { "content-type": "application/json" },
    });
    await fetch(`${server.url}/api/v1/queues/orders/consumers/billing/messages?max_messages=2`);
    await fetch(`${server.url}/api/v1/queues/orders/consumers/billing/commit`, { method: "POST" });
    const viaUrl = JSON.parse((await cli(["stat", "--json", "--url", server.url])).stdout) as unknown;
    const direct = JSON.parse((await cli(["stat", "--json", "--dir", server.dir])).stdout) as unknown;
    expect(direct).toEqual(viaUrl);
    expect(direct).toEqual([
      {
        name: "orders",
        currentPart: 0,
        currentCount: 3,
        parts: 1,
        messages: 3,
        bytes: expect.any(Number),
        consumers: [
          { name: "billing", kind: "ordered", part: 0, position: expect.any(Number), count: 2, lag: 1, cursor: expect.stringMatching(/^0\.\d+\.2$/) },
        ],
      },
    ]);
    const text = await cli(["stat", "orders", "--url", server.url]);
    expect(text.stdout).toMatch(/^orders: 3 messages, \d+ bytes in 1 part \(current part 0, 3 messages\)$/m);
  });
});
