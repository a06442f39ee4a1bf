// A partitioned queue's messages browsed, and the queue purged and pruned, over HTTP and through the client.
import { describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { partitionOfKey } from "../../src/partitions/declaration";
import { errorCode, startServer } from "./_server";

describe("partitioned queues over HTTP: browse, purge, prune", () => {
  it("browse pages take from every partition (each message once, with its partition), or one partition; bad starts are 400 saying what to give", async () => {
    const s = await startServer({ queues: { events: { partitions: 4 } } });
    const client = createClient({ baseURL: s.url });
    const sent: string[] = [];
    for (let n = 0; n < 5; n++) {
      for (const key of ["a", "b", "c", "d", "e", "f"]) {
        await client.produce("events", `${key}${n}`, { partitionKey: key });
        sent.push(`${key}${n}`);
      }
    }
    const seen: { data: string; partition: number | undefined }[] = [];
    let from: string | undefined;
    for (let pages = 0; pages < 100; pages++) {
      const page = await client.browse("events", { limit: 4, ...(from ? { from } : {}) });
      seen.push(...page.messages.map((m) => ({ data: String(m.data), partition: m.partition })));
      if (page.next === null) break;
      from = page.next;
    }
    expect(seen.map((m) => m.data).sort()).toEqual([...sent].sort());
    for (const m of seen) expect(m.partition).toBe(partitionOfKey(m.data[0]!, 4));

    const one = partitionOfKey("c", 4);
    const alone = await client.browse("events", { partition: one, limit: 1000 });
    expect(alone.messages.length).toBeGreaterThan(0);
    expect(alone.messages.every((m) => m.partition === one)).toBe(true);
    expect(alone.messages.filter((m) => String(m.data).startsWith("c")).map((m) => m.data)).toEqual(["c0", "c1", "c2", "c3", "c4"]);

    for (const query of ["part=0&seq=1", "from=0.0.0", "from=p4:0.0.0", "partition=4", "partition=-1", "partition=0&from=p1:0.0.0"]) {
      const res = await fetch(`${s.url}/api/v1/queues/events/browse?${query}`);
      expect(res.status, query).toBe(400);
      expect(["E_PARAM", "E_OPTION"], query).toContain(await errorCode(res));
    }
    const plain = await client.produce("plain", "x").then(() => fetch(`${s.url}/api/v1/queues/plain/browse?partition=0`));
    expect(plain.status).toBe(400);
  });

  it("purge empties every partition (the consumers go on from there); prune applies its limits to each partition", async () => {
    const s = await startServer({ queues: { jobs: { partitions: 3 } } });
    const client = createClient({ baseURL: s.url });
    for (const key of ["a", "b", "c", "d"]) await client.produce("jobs", [`${key}1`, `${key}2`], { partitionKey: key });
    const read = await client.consume("jobs", "reader", { maxMessages: 2 });
    await client.commit("jobs", "reader", read.cursor);

    const pruned = await fetch(`${s.url}/api/v1/queues/jobs/prune`, {
      method: "POST",
      body: JSON.stringify({ maxParts: 1 }),
      headers: { "content-type": "application/json" },
    });
    expect(pruned.status).toBe(200);
    const prunedBody = (await pruned.json()) as { messages: number; partitions: { partition: number; parts: number[] }[] };
    // One part per partition, the current one: nothing to delete, and each partition says so.
    expect(prunedBody.messages).toBe(0);
    expect(prunedBody.partitions.map((p) => p.partition).sort()).toEqual(
      [0, 1, 2].filter((k) => ["a", "b", "c", "d"].some((key) => partitionOfKey(key, 3) === k)),
    );

    const purged = await fetch(`${s.url}/api/v1/queues/jobs/purge`, { method: "POST" });
    expect(purged.status).toBe(200);
    expect(await purged.json()).toMatchObject({ queue: "jobs", messages: 8 });
    expect((await client.browse("jobs")).messages).toEqual([]);
    await client.produce("jobs", "after", { partitionKey: "a" });
    expect((await client.consume("jobs", "reader")).messages.map((m) => m.data)).toEqual(["after"]);

    // DELETE of the consumer: this server's reader closed, its files gone from every partition; the next of that name starts at the oldest.
    const deleted = await fetch(`${s.url}/api/v1/queues/jobs/consumers/reader`, { method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect((await client.consumers("jobs")).consumers).toEqual([]);
    expect((await client.consume("jobs", "reader")).messages.map((m) => m.data)).toEqual(["after"]);
    expect((await fetch(`${s.url}/api/v1/queues/jobs/consumers/nobody`, { method: "DELETE" })).status).toBe(404);
  });
});
