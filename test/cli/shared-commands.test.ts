import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { partitionOfKey } from "../../src/partitions/declaration";
import { useTempDirs } from "../helpers/tmp";
import { cli, STACK, useServer } from "./_cli";

const tempDir = useTempDirs("vq-cli-shared-");

/** Dead-letters the first `count` messages of `queue` through shared consumer "s" (maxDeliveries 1). */
async function deadLetter(dir: string, queue: string, count: number, error: string): Promise<void> {
  const c = await SharedConsumer.open(queue, "s", { driver: fsDriver({ dir }), maxDeliveries: 1, syncCommits: false });
  for (const m of await c.poll({ max: count })) await c.nack(m, { error });
  await c.close();
}

describe("v-queue shared consumers on the files (--dir)", () => {
  it("dlq of a partitioned queue lists the dead letters of every partition's <queue>.p<k>.dead, saying which", async () => {
    const dir = await tempDir();
    await cli(["create", "events", "--partitions", "3", "--dir", dir]);
    for (const key of ["a", "b", "c", "d"]) await cli(["push", "events", key, "--partition-key", key, "--dir", dir]);
    const c = await PartitionedSharedConsumer.open("events", "s", { driver: fsDriver({ dir }), maxDeliveries: 1, syncCommits: false });
    for (const m of await c.poll({ max: 10 })) await c.nack(m, { error: "no" });
    await c.close();
    const listed = await cli(["dlq", "events", "--dir", dir]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.split("\n").filter(Boolean);
    expect(lines.map((line) => line.split(" ")[0]).sort()).toEqual(["a", "b", "c", "d"].map((key) => `events.p${partitionOfKey(key, 3)}.dead`).sort());
    for (const line of lines) expect(line).toMatch(/^events\.p(\d)\.dead 0\.\d+ from events\.p\1\/s .*error: no: [a-d]$/);
    expect(listed.stderr).toMatch(/4 messages in (\d) dead-letter queues|4 messages in events\.p\d\.dead/);
  });

  it("lease refuses without --url or --ack (leases live in the server); lease --ack takes messages for good; ack/nack/extend need --url", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "b", "c", "--dir", dir]);
    const refused = await cli(["lease", "q", "w", "--dir", dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("A lease lives in the memory of the process that holds the shared consumer");
    expect(refused.stderr).toContain('"lease --ack"');
    expect(refused.stderr).not.toMatch(STACK);

    const taken = await cli(["lease", "q", "w", "--ack", "--max", "2", "--dir", dir]);
    expect(taken.code).toBe(0);
    expect(taken.stdout).toMatch(/^0\.0\.(\d+) a\n0\.26\.(\d+) b\n$/);
    expect(taken.stderr).toContain("2 messages of q as w, acknowledged.");
    const json = await cli(["lease", "q", "w", "--ack", "--json", "--dir", dir]);
    expect(JSON.parse(json.stdout)).toMatchObject({ part: 0, offset: 52, seq: 3, type: "string", data: "c", deliveries: 1 });
    expect((await cli(["lease", "q", "w", "--ack", "--dir", dir])).stdout).toBe("");

    for (const args of [
      ["ack", "q", "w", "0.0.1"],
      ["nack", "q", "w", "0.0.1", "--dead"],
      ["extend", "q", "w", "0.0.1"],
    ]) {
      const run = await cli([...args, "--dir", dir]);
      expect(run.code, args[0]).toBe(1);
      expect(run.stderr).toContain("go through a server (--url");
    }
    const badDuration = await cli(["lease", "q", "w", "--ack", "--lease", "30", "--dir", dir]);
    expect(badDuration.code).toBe(1);
    expect(badDuration.stderr).toContain('Invalid --lease "30": use a duration with its unit');

    // An ordered consumer's name is refused as a shared one.
    await cli(["consume", "q", "o", "--max", "1", "--dir", dir]);
    const kind = await cli(["lease", "q", "o", "--ack", "--dir", dir]);
    expect(kind.code).toBe(1);
    expect(kind.stderr).toContain("is an ordered consumer");
  });

  it("stat shows each consumer's kind and a shared one's pending, acked above the floor, dead letters and oldest unacked", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "a", "b", "c", "d", "--dir", dir]);
    await cli(["consume", "q", "o", "--max", "1", "--dir", dir]);
    const c = await SharedConsumer.open("q", "s", { driver: fsDriver({ dir }), maxDeliveries: 3, syncCommits: false });
    const [a, b, cc] = await c.poll({ max: 3 });
    await c.ack(b!);
    await c.nack(a!);
    await c.poll({ max: 1 }); // a again
    await c.nack(cc!, { delayMs: 60_000 });
    await c.close();

    const text = await cli(["stat", "q", "--dir", dir]);
    expect(text.stdout).toContain("consumer o (ordered): part 0, position 26, read 1 in part, lag 3\n");
    expect(text.stdout).toContain(
      "consumer s (shared): ack floor part 0, position 0, read 0 in part, lag 3; 2 pending (1 redelivered, at most 2 deliveries), 1 acked above the floor, 0 dead-lettered, oldest unacked 0.0 (seq 1, 2 deliveries)\n",
    );
    const [q] = JSON.parse((await cli(["stat", "q", "--json", "--dir", dir])).stdout);
    expect(q.consumers).toEqual([
      { name: "o", kind: "ordered", part: 0, position: 26, count: 1, lag: 3, cursor: "0.26.1" },
      {
        name: "s",
        kind: "shared",
        part: 0,
        position: 0,
        count: 0,
        lag: 3,
        cursor: "0.0.0",
        shared: {
          ackedAboveFloor: 1,
          pending: 2,
          redelivered: 1,
          maxDeliveries: 2,
          deadLettered: 0,
          oldestUnacked: { part: 0, offset: 0, seq: 1, deliveries: 2 },
        },
      },
    ]);
  });

  it("dlq lists dead letters without consuming them; redrive needs --yes and moves them back to their origin", async () => {
    const dir = await tempDir();
    await cli(["push", "q", "first", "x".repeat(200), "third", "--dir", dir]);
    await deadLetter(dir, "q", 2, "it broke\non two lines");

    const listed = await cli(["dlq", "q", "--dir", dir]);
    expect(listed.code).toBe(0);
    const lines = listed.stdout.split("\n").filter(Boolean);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^0\.0 from q\/s 0\.0 \(seq 1\), 1 delivery, \d{4}-\d\d-\d\dT[\d:.]+Z, error: it broke on two lines: first$/);
    expect(lines[1]).toMatch(/: x{80}…$/);
    expect(listed.stderr).toContain("2 messages in q.dead.");
    // A peek: the same again, and no consumer left behind.
    expect((await cli(["dlq", "q.dead", "--dir", dir])).stdout).toBe(listed.stdout);
    const stat = JSON.parse((await cli(["stat", "q.dead", "--json", "--dir", dir])).stdout);
    expect(stat[0].consumers).toEqual([]);
    const json = (await cli(["dlq", "q", "--json", "--max", "1", "--dir", dir])).stdout
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(json).toEqual([
      {
        part: 0,
        offset: 0,
        seq: 1,
        origin: { queue: "q", consumer: "s", part: 0, offset: 0, seq: 1 },
        deliveries: 1,
        error: "it broke\non two lines",
        at: expect.any(String),
        type: "string",
        data: "first",
      },
    ]);

    const missing = await cli(["dlq", "nope", "--dir", dir]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('Neither "nope.dead" nor "nope" exists');

    const refused = await cli(["redrive", "q.dead", "--dir", dir]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Refusing to move the messages of "q.dead" to their origin queues without --yes.');
    const moved = await cli(["redrive", "q.dead", "--max", "1", "--yes", "--dir", dir]);
    expect(moved.stderr).toContain('Moved 1 message from "q.dead" to their origin queues');
    const rest = await cli(["redrive", "q.dead", "--to", "other", "-y", "--dir", dir]);
    expect(rest.stderr).toContain('Moved 1 message from "q.dead" to "other"');
    expect((await cli(["consume", "q", "check", "--dir", dir])).stdout).toBe(`first\n${"x".repeat(200)}\nthird\nfirst\n`);
    expect((await cli(["consume", "other", "check", "--dir", dir])).stdout).toBe(`${"x".repeat(200)}\n`);
    expect((await cli(["redrive", "q.dead", "-y", "--dir", dir])).stderr).toContain("Moved 0 messages");
  });
});

describe("v-queue shared consumers through a server (--url)", () => {
  const server = useServer(tempDir);

  it("lease prints messages with their tokens; ack, nack (--delay, --dead, --error), extend by token; stat shows the live state", async () => {
    const url = ["--url", server.url];
    await cli(["push", "jobs", "a", "b", "c", "d", ...url]);
    const leased = await cli(["lease", "jobs", "w", "--max", "3", "--lease", "1m", ...url]);
    expect(leased.code).toBe(0);
    expect(leased.stdout).toMatch(/^0\.0\.\d+ a\n0\.26\.\d+ b\n0\.52\.\d+ c\n$/);
    expect(leased.stderr).toContain("Leased 3 messages of jobs as w");
    const [ta, tb, tc] = leased.stdout.split("\n").map((line) => line.split(" ")[0]!);

    const stat = await cli(["stat", "jobs", ...url]);
    expect(stat.stdout).toContain(
      "consumer w (shared): ack floor part 0, position 0, read 0 in part, lag 4; 3 in flight, 0 redeliveries and 0 dead-lettered since the server opened it, oldest unacked 0.0 (seq 1)",
    );

    const acked = await cli(["ack", "jobs", "w", ta!, "9.9.9", ...url]);
    expect(acked.code).toBe(1); // one of the two was refused
    expect(acked.stderr).toContain("Acknowledged 1 lease.");
    expect(acked.stderr).toMatch(/9\.9\.9: .*\(E_LEASE\)/);
    const extended = await cli(["extend", "jobs", "w", tb!, "--lease", "2m", ...url]);
    expect(extended.code).toBe(0);
    expect(extended.stdout).toMatch(new RegExp(`^${tb!.replace(/\./g, "\\.")} \\d{4}-\\d\\d-\\d\\dT`));
    expect((await cli(["nack", "jobs", "w", tb!, "--delay", "1h", ...url])).stderr).toContain("Gave back 1 lease.");
    expect((await cli(["nack", "jobs", "w", tc!, "--dead", "--error", "bad input", ...url])).code).toBe(0);

    // c went to the dead-letter queue, b waits an hour: d comes next, as JSON.
    const json = await cli(["lease", "jobs", "w", "--json", "--wait", "1s", ...url]);
    expect(JSON.parse(json.stdout)).toMatchObject({
      part: 0,
      offset: 78,
      seq: 4,
      type: "string",
      data: "d",
      deliveries: 1,
      lease: expect.stringMatching(/^0\.78\.\d+$/),
    });
    const badToken = await cli(["ack", "jobs", "w", "nope", ...url]);
    expect(badToken.code).toBe(1);
    expect(badToken.stderr).toContain('Invalid lease "nope"');

    const dlq = await cli(["dlq", "jobs", ...url]);
    expect(dlq.stdout).toMatch(/^0\.0 from jobs\/w 0\.52 \(seq 3\), 1 delivery, .*Z, error: bad input: c\n$/);
    expect(dlq.stderr).toContain("1 message in jobs.dead.");
    // A peek: the throwaway consumer is gone.
    const consumers = JSON.parse((await cli(["stat", "jobs.dead", "--json", ...url])).stdout)[0].consumers;
    expect(consumers).toEqual([]);

    const moved = await cli(["redrive", "jobs.dead", "--yes", ...url]);
    expect(moved.stderr).toContain('Moved 1 message from "jobs.dead" to their origin queues.');
    expect((await cli(["consume", "jobs", "check", ...url])).stdout).toBe("a\nb\nc\nd\nc\n");

    // A back-off: no lease to anyone until then.
    await cli(["push", "jobs", "e", ...url]);
    const backedOff = await cli(["backoff", "jobs", "w", "1h", ...url]);
    expect(backedOff.code).toBe(0);
    expect(backedOff.stderr).toMatch(/Shared consumer w of jobs hands nothing out until \d{4}-\d\d-\d\dT/);
    expect((await cli(["lease", "jobs", "w", ...url])).stdout).toBe("");
    const badBackoff = await cli(["backoff", "jobs", "w", "soon", ...url]);
    expect(badBackoff.code).toBe(1);
    expect(badBackoff.stderr).toContain('Invalid duration "soon": use a duration with its unit');
    expect(badBackoff.stderr).not.toMatch(STACK);

    // An ordered consumer's name: E_KIND, told clearly.
    const kind = await cli(["lease", "jobs", "check", ...url]);
    expect(kind.code).toBe(1);
    expect(kind.stderr).toContain("E_KIND");
    expect(kind.stderr).not.toMatch(STACK);
  });
});
