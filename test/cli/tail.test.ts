import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueWriter } from "../../src/writer/writer";
import { partitionOfKey } from "../../src/partitions/declaration";
import { useTempDirs } from "../helpers/tmp";
import { cli, startCli, until, useServer, STACK } from "./_cli";

const tempDir = useTempDirs("vq-cli-tail-");

async function pushTo(dir: string, queue: string, messages: (string | Uint8Array)[]): Promise<void> {
  const writer = await QueueWriter.open(queue, { driver: fsDriver({ dir }), durability: "none" });
  await writer.pushBatch(messages);
  await writer.close();
}

const lines = (text: string) => text.split("\n").filter(Boolean);

/** Starts `tail`, waits until it follows, and returns a way to stop it (SIGINT). */
async function startTail(args: string[]) {
  const run = startCli(["tail", ...args]);
  run.child.stdin!.end();
  // Following, or already printing (or failed): what it printed is checked by the caller.
  await until(run.output, (r) => r.stderr.includes("Following") || r.stdout.length > 0 || r.code !== null, 5000).catch(() => {});
  return {
    output: run.output,
    stop: async () => {
      run.child.kill("SIGINT");
      return run.exited;
    },
  };
}

describe("v-queue tail on the files", () => {
  it("a partitioned queue: consume reads and commits every partition, tail follows them all and leaves no position behind", async () => {
    const dir = await tempDir();
    expect((await cli(["create", "events", "--partitions", "3", "--dir", dir])).code).toBe(0);
    for (const key of ["a", "b", "c", "d"]) await cli(["push", "events", `${key}1`, `${key}2`, "--partition-key", key, "--dir", dir]);
    const read = await cli(["consume", "events", "c", "--dir", dir]);
    expect(read.code).toBe(0);
    expect(lines(read.stdout).sort()).toEqual(["a1", "a2", "b1", "b2", "c1", "c2", "d1", "d2"]);
    expect(lines((await cli(["consume", "events", "c", "--dir", dir])).stdout)).toEqual([]);
    const t = await startTail(["events", "--dir", dir]);
    await cli(["push", "events", "new-1", "--partition-key", "z", "--dir", dir]);
    await until(t.output, (r) => r.stdout.includes("new-1"));
    const r = await t.stop();
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toEqual(["new-1"]);
    expect(r.stderr).not.toMatch(STACK);
    expect(readdirSync(dir).filter((f) => f.includes("ephemeral"))).toEqual([]);
  });

  it("a partitioned queue: tail prints what goes to a partition first written after it started; on a queue never written it ends cleanly", async () => {
    const dir = await tempDir();
    expect((await cli(["create", "wide", "--partitions", "8", "--dir", dir])).code).toBe(0);
    const empty = await startTail(["wide", "--dir", dir]);
    const ended = await empty.stop();
    expect(ended.code).toBe(0);
    expect(ended.stderr).not.toMatch(STACK);
    await cli(["push", "wide", "old", "--partition-key", "k0", "--dir", dir]);
    const t = await startTail(["wide", "--dir", dir]);
    // A key of a partition nobody wrote yet (not k0's).
    const fresh = Array.from({ length: 100 }, (_, i) => `k${i}`).find((key) => partitionOfKey(key, 8) !== partitionOfKey("k0", 8))!;
    await cli(["push", "wide", "first-of-its-partition", "--partition-key", fresh, "--dir", dir]);
    await until(t.output, (r) => r.stdout.includes("first-of-its-partition"));
    const r = await t.stop();
    expect(lines(r.stdout)).toEqual(["first-of-its-partition"]);
    expect(readdirSync(dir).filter((f) => f.includes("ephemeral"))).toEqual([]);
  });

  it("follows from the end, keeps no position, and any number run at once", async () => {
    const dir = await tempDir();
    await pushTo(dir, "orders", ["old-1", "old-2"]);
    const [a, b] = await Promise.all([startTail(["orders", "--dir", dir]), startTail(["orders", "--dir", dir])]);
    await pushTo(dir, "orders", ["new-1"]);
    for (const t of [a, b]) await until(t.output, (r) => r.stdout.includes("new-1"));
    const [ra, rb] = await Promise.all([a.stop(), b.stop()]);
    for (const r of [ra, rb]) {
      expect(r.code).toBe(0);
      expect(lines(r.stdout)).toEqual(["new-1"]);
      expect(r.stderr).not.toMatch(STACK);
    }
    // Nothing saved: no position file, no lock left behind.
    expect(readdirSync(dir).filter((f) => f.includes("_info_pop_"))).toEqual([]);
    // A later tail does not replay what earlier ones saw.
    const c = await startTail(["orders", "--dir", dir]);
    await pushTo(dir, "orders", ["new-2"]);
    await until(c.output, (r) => r.stdout.includes("new-2"));
    expect(lines((await c.stop()).stdout)).toEqual(["new-2"]);
    expect(readdirSync(dir).filter((f) => f.includes("_info_pop_"))).toEqual([]);
  });

  it("prints bytes with a base64: marker", async () => {
    const dir = await tempDir();
    await pushTo(dir, "bin", ["first"]);
    const t = await startTail(["bin", "--dir", dir, "--max", "2"]);
    await pushTo(dir, "bin", [new Uint8Array([0, 1, 255]), "text"]);
    await until(t.output, (r) => r.code !== null);
    expect(lines(t.output().stdout)).toEqual(["base64:AAH/", "text"]);
  });
});

describe("through a server (--url)", () => {
  const server = useServer(tempDir);
  const consumers = async (queue: string) =>
    ((await (await fetch(`${server.url}/api/v1/queues/${queue}/consumers`)).json()) as { consumers: { name: string }[] }).consumers.map((c) => c.name);
  const produce = (queue: string, body: string) => fetch(`${server.url}/api/v1/queues/${queue}/messages`, { method: "POST", body });

  it("tail follows from the end, two at once, and leaves no consumer", async () => {
    for (const m of ["old-1", "old-2", "old-3"]) await produce("events", m);
    const [a, b] = await Promise.all([startTail(["events", "--url", server.url]), startTail(["events", "--url", server.url])]);
    await produce("events", "new-1");
    for (const t of [a, b]) await until(t.output, (r) => r.stdout.includes("new-1"));
    const [ra, rb] = await Promise.all([a.stop(), b.stop()]);
    for (const r of [ra, rb]) {
      expect(r.code).toBe(0);
      expect(lines(r.stdout)).toEqual(["new-1"]);
    }
    expect(await consumers("events")).toEqual([]);
  });

  it("consume --from latest starts a new consumer at the end; an existing one resumes", async () => {
    for (const m of ["a", "b", "c"]) await produce("jobs", m);
    let run = await cli(["consume", "jobs", "late", "--from", "latest", "--url", server.url]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("");
    await produce("jobs", "d");
    run = await cli(["consume", "jobs", "late", "--from", "latest", "--url", server.url]);
    expect(lines(run.stdout)).toEqual(["d"]);
    run = await cli(["consume", "jobs", "early", "--url", server.url, "--max", "2"]);
    expect(lines(run.stdout)).toEqual(["a", "b"]);
    // --from is for a new consumer: "early" has a position, it resumes there.
    run = await cli(["consume", "jobs", "early", "--from", "latest", "--url", server.url]);
    expect(lines(run.stdout)).toEqual(["c", "d"]);
  });

  it("consume prints bytes with the base64: marker, and as type object in JSON, as on the files", async () => {
    await fetch(`${server.url}/api/v1/queues/blobs/messages`, {
      method: "POST",
      body: new Uint8Array([0, 1, 255]),
      headers: { "content-type": "application/octet-stream" },
    });
    await produce("blobs", "plain");
    const text = await cli(["consume", "blobs", "t", "--url", server.url, "--no-commit"]);
    expect(lines(text.stdout)).toEqual(["base64:AAH/", "plain"]);
    const json = await cli(["consume", "blobs", "t", "--url", server.url, "--json"]);
    const [bytes, plain] = lines(json.stdout).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(bytes).toMatchObject({ type: "object", data: "AAH/", encoding: "base64" });
    expect(plain).toMatchObject({ type: "string", data: "plain" });
    expect(plain).not.toHaveProperty("encoding");
    expect(json.stderr).toContain("2 messages from blobs as t, committed.");
  });
});
