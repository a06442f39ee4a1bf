/** `v-queue schedule set|list|rm` on the files and through a server (the built CLI: `npm run build` first). */
import { describe, expect, it } from "vitest";
import { startServer } from "../http/_server";
import { useTempDirs } from "../helpers/tmp";
import { cli } from "./_cli";

const tempDir = useTempDirs("vq-cli-schedule-");

describe("v-queue schedule", () => {
  it("sets, lists and removes schedules on the files and through --url; bad ones are refused saying what is allowed", async () => {
    const dir = tempDir();
    const set = await cli(["schedule", "set", "jobs", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Paris", "--message", "report", "--dir", dir]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).toContain('Created schedule "nightly" of "jobs": cron "0 3 * * *" in Europe/Paris, never fired, next 20');
    const again = await cli(["schedule", "set", "jobs", "nightly", "--cron", "0 4 * * *", "--tz", "Europe/Paris", "--dir", dir]);
    expect(again.stderr).toContain('Updated schedule "nightly"');

    const bad = await cli(["schedule", "set", "jobs", "x", "--cron", "0 3 * * *", "--tz", "Atlantis/Capital", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("IANA time zone");
    const both = await cli(["schedule", "set", "jobs", "x", "--every", "1s", "--cron", "* * * * *", "--dir", dir]);
    expect(both.stderr).toContain("Give exactly one of --cron and --every.");
    expect((await cli(["schedule", "move", "jobs", "--dir", dir])).stderr).toContain('Unknown action "move": use set, list or rm.');

    const s = await startServer({ dir });
    const over = await cli(["schedule", "set", "jobs", "ping", "--every", "1h", "--url", s.url]);
    expect(over.code, over.stderr).toBe(0);
    const listed = await cli(["schedule", "list", "jobs", "--json", "--url", s.url]);
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((x) => x.name)).toEqual(["nightly", "ping"]);
    expect((await cli(["schedule", "rm", "jobs", "ping", "--url", s.url])).stderr).toContain('Removed schedule "ping" of "jobs".');
    await s.close();

    const onFiles = await cli(["schedule", "list", "jobs", "--dir", dir]);
    expect(onFiles.stdout).toMatch(/^nightly\tcron "0 4 \* \* \*" in Europe\/Paris, never fired, next \S+\n$/);
    const gone = await cli(["schedule", "rm", "jobs", "ping", "--dir", dir]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('Queue "jobs" has no schedule "ping".');
  });

  it("sets, lists and removes the schedules of a partitioned queue on the files (kept by its partition 0)", async () => {
    const dir = tempDir();
    expect((await cli(["create", "orders", "--partitions", "3", "--dir", dir])).code).toBe(0);
    const set = await cli(["schedule", "set", "orders", "sweep", "--every", "1h", "--dir", dir]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).toContain('Created schedule "sweep" of "orders": every 3600000 ms, never fired, next 20');
    const listed = await cli(["schedule", "list", "orders", "--json", "--dir", dir]);
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((x) => x.name)).toEqual(["sweep"]);
    expect((await cli(["schedule", "rm", "orders", "sweep", "--dir", dir])).stderr).toContain('Removed schedule "sweep" of "orders".');
    expect((await cli(["schedule", "list", "orders", "--dir", dir])).stderr).toContain('Queue "orders" has no schedules.');
  });
});
