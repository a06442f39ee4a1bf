import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { startChild } from "../helpers/spawn";
import { useTempDirs } from "../helpers/tmp";
import { startServer } from "../http/_server";
import { cli, STACK } from "./_cli";

const tempDir = useTempDirs("vq-cli-admin-");

describe("v-queue purge and delete", () => {
  it("on the files: need --yes, purge keeps the consumers, delete removes a consumer or the whole queue", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "b", "--dir", dir]);
    await cli(["push", "q-1", "other", "--dir", dir]);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("a\nb\n");

    const refused = await cli(["purge", "q", "--dir", dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Refusing to purge queue "q" (every message goes) without --yes.');
    expect(refused.stderr).not.toMatch(STACK);

    const purged = await cli(["purge", "q", "--yes", "--dir", dir]);
    expect(purged.code).toBe(0);
    expect(purged.stderr).toContain('Purged "q": 2 messages, 52 bytes in 1 part removed; it goes on in part 1.');
    await cli(["push", "q", "after", "--dir", dir]);
    expect((await cli(["consume", "q", "c", "--dir", dir])).stdout).toBe("after\n");

    expect((await cli(["delete", "q", "c", "-y", "--dir", dir])).stderr).toContain('Deleted consumer "c" of "q".');
    const gone = await cli(["delete", "q", "c", "-y", "--dir", dir]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Consumer "c" of queue "q" does not exist');

    const deleted = await cli(["delete", "q", "--yes", "--dir", dir]);
    expect(deleted.code).toBe(0);
    expect(deleted.stderr).toContain('Deleted "q": 1 part and 0 consumers.');
    expect(readdirSync(dir).sort()).toEqual(["q-1-0", "q-1_info_queue"]);
    const missing = await cli(["delete", "q", "--yes", "--dir", dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Queue "q" does not exist.');
  });

  it("on the files, a writer open in another process: refused with the lock's message, exit 1", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "--dir", dir]);
    const child = startChild("hold-writer", dir, "q");
    try {
      await child.waitFor((line) => line === "ready");
      const run = await cli(["purge", "q", "--yes", "--dir", dir]);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('Cannot purge queue "q": its writer is open');
      expect(run.stderr).toContain("--url");
      expect(run.stderr).not.toMatch(STACK);
    } finally {
      child.process.kill("SIGKILL");
      await child.exited;
    }
  });

  it("through --url, with the admin right", async () => {
    const s = await startServer({
      auth: {
        users: [
          { username: "admin", password: "p" },
          { username: "rw", password: "r", admin: false },
        ],
      },
    });
    const auth = ["--url", s.url, "--user", "admin:p"];
    await cli(["push", "q", "a", "b", ...auth]);
    expect((await cli(["consume", "q", "c", ...auth])).stdout).toBe("a\nb\n");
    const forbidden = await cli(["purge", "q", "--yes", "--url", s.url, "--user", "rw:r"]);
    expect(forbidden.code).toBe(1);
    expect(forbidden.stderr).toContain("The server answered 403 E_FORBIDDEN");
    expect((await cli(["purge", "q", "--yes", ...auth])).stderr).toContain('Purged "q": 2 messages');
    expect((await cli(["delete", "q", "c", "--yes", ...auth])).stderr).toContain('Deleted consumer "c" of "q".');
    expect((await cli(["delete", "q", "--yes", ...auth])).stderr).toContain('Deleted "q": 1 part and 0 consumers.');
    const missing = await cli(["delete", "q", "--yes", ...auth]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("The server answered 404 E_NOT_FOUND");
  });
});
