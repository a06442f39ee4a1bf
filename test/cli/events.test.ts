// `v-queue events` and `v-queue outcome` on the files: a shared consumer's outcomes from a shell.
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { useTempDirs } from "../helpers/tmp";
import { cli } from "./_cli";

const tempDir = useTempDirs("vq-cli-events-");

describe("v-queue events and outcome (--dir)", () => {
  it("prints the events kept, resumes after a cursor, and waits for a message's end with exit codes for dead and none", async () => {
    const dir = tempDir();
    await cli(["push", "q", "a", "b", "c", "--dir", dir]);
    const c = await SharedConsumer.open("q", "w", { driver: fsDriver({ dir }), maxDeliveries: 1, syncCommits: false });
    const [a, b, d] = await c.poll({ max: 3 });
    await c.progress(a!, 0.5);
    await c.ack(a!, { result: { rows: 3 } });
    await c.nack(b!, { error: "bad row" });
    await c.close();

    const listed = await cli(["events", "q", "w", "--from", "oldest", "--count", "3", "--dir", dir]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trim().split("\n");
    expect(lines[0]).toMatch(new RegExp(`progress +0\\.${a!.offset} +delivery 1 +0\\.5$`));
    expect(lines[1]).toMatch(new RegExp(`completed +0\\.${a!.offset} +delivery 1 +\\{"rows":3\\}$`));
    expect(lines[2]).toMatch(new RegExp(`dead +0\\.${b!.offset} +delivery 1 +error: bad row$`));

    const json = await cli(["events", "q", "w", "--from", "oldest", "--count", "1", "--json", "--dir", dir]);
    const first = JSON.parse(json.stdout);
    expect(first).toMatchObject({ kind: "progress", progress: 0.5, cursor: "1" });
    const resumed = await cli(["events", "q", "w", "--after", first.cursor, "--count", "1", "--json", "--dir", dir]);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ kind: "completed", result: { rows: 3 } });

    const done = await cli(["outcome", "q", "w", `0.${a!.offset}`, "--json", "--dir", dir]);
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toMatchObject({ kind: "completed", result: { rows: 3 } });
    const dead = await cli(["outcome", "q", "w", `0.${b!.offset}`, "--dir", dir]);
    expect(dead.code).toBe(1);
    expect(dead.stdout).toContain("error: bad row");
    const none = await cli(["outcome", "q", "w", `0.${d!.offset}`, "--wait", "200ms", "--dir", dir]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(`No end of 0.${d!.offset}`);
    const bad = await cli(["outcome", "q", "w", "first", "--dir", dir]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('Invalid message "first": use <part>.<offset>');
  });
});
