import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createClient, type ProduceResponse } from "../../client/index";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumer";
import { declarePartitions, partitionName, partitionOfKey } from "../../src/partitions";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { configProblems } from "../../adapters/config-schema";
import { basic, errorCode, jsonHeaders, startServer } from "./_server";

const put = (s: { url: string }, queue: string, body: string, headers: Record<string, string> = jsonHeaders) => fetch(`${s.url}/api/v1/queues/${queue}`, { method: "PUT", body, headers: { ...jsonHeaders, ...headers } });

describe("partitioned queues over HTTP: declaring", () => {
  it("PUT declares (201), again with the same count is 200, another count or an ordinary queue is 409 E_CONFLICT", async () => {
    const s = await startServer();
    const first = await put(s, "orders", JSON.stringify({ partitions: 4 }));
    expect(first.status).toBe(201);
    expect(await first.json()).toEqual({ queue: "orders", partitions: 4, created: true });
    expect(existsSync(join(s.dir, "orders_info_partitions"))).toBe(true);
    const again = await put(s, "orders", JSON.stringify({ partitions: 4 }));
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ queue: "orders", partitions: 4, created: false });
    const other = await put(s, "orders", JSON.stringify({ partitions: 5 }));
    expect(other.status).toBe(409);
    expect(await errorCode(other)).toBe("E_CONFLICT");
    await s.post("/api/v1/queues/plain/messages", "x");
    const ordinary = await put(s, "plain", JSON.stringify({ partitions: 2 }));
    expect(ordinary.status).toBe(409);
    expect(((await ordinary.json()) as { error: { message: string } }).error.message).toMatch(/ordinary queue/);
  });

  it("refuses bad bodies with what is allowed, and needs the admin right", async () => {
    const s = await startServer({ auth: { users: [{ username: "rw", password: "p", admin: false }, { username: "a", password: "p" }] } });
    const admin = basic("a", "p");
    for (const body of ["", "{", "[]", '{"partitions":0}', '{"partitions":1025}', '{"partitions":1.5}', '{"partitions":"3"}', '{"partitions":2,"x":1}']) {
      const res = await put(s, "q", body, admin);
      expect(res.status, body).toBe(400);
      expect(await errorCode(res)).toBe("E_BODY");
    }
    const forbidden = await put(s, "q", JSON.stringify({ partitions: 2 }), basic("rw", "p"));
    expect(forbidden.status).toBe(403);
    expect((await put(s, "q", JSON.stringify({ partitions: 2 }), admin)).status).toBe(201);
  });

  it("the client declares; the queues option declares at start, and a conflicting one stops the start", async () => {
    const s = await startServer({ queues: { events: { partitions: 3 } } });
    expect(existsSync(join(s.dir, "events_info_partitions"))).toBe(true);
    const client = createClient({ baseURL: s.url });
    expect(await client.declare("events", { partitions: 3 })).toEqual({ queue: "events", partitions: 3, created: false });
    expect(await client.declare("more", { partitions: 2 })).toEqual({ queue: "more", partitions: 2, created: true });
    await expect(client.declare("more", { partitions: 7 })).rejects.toMatchObject({ status: 409, code: "E_CONFLICT" });
    await expect(startServer({ dir: s.dir, queues: { events: { partitions: 4 } } })).rejects.toThrow(/declared with 3 partitions/);
  });

  it("checks queues.<name>.partitions in the options (and so in the config schema)", () => {
    expect(() => createQueueHandler({ driver: memoryDriver(), queues: { q: { partitions: 0 } } })).toThrow(/queues\.q\.partitions 0: use an integer from 1 to 1024/);
    expect(() => createQueueHandler({ driver: memoryDriver(), queues: { ["x".repeat(126)]: { partitions: 10 } } })).toThrow(/too long to be partitioned/);
    expect(configProblems({ queues: { q: { partitions: "6" } } }).join()).toMatch(/queues\.q\.partitions "6"/);
  });
});

describe("partitioned queues over HTTP: producing", () => {
  const produce = (s: { url: string }, queue: string, body: string, headers: Record<string, string> = {}, query = "") =>
    fetch(`${s.url}/api/v1/queues/${queue}/messages${query}`, { method: "POST", body, headers: { ...jsonHeaders, ...headers } });

  it("a keyed batch goes whole to its key's partition (header, query or body field), and the answer says which", async () => {
    const s = await startServer({ queues: { orders: { partitions: 4 } } });
    const expected = partitionOfKey("customer-7", 4);
    for (const [headers, query, body] of [
      [{ "partition-key": "customer-7" }, "", { messages: ["a", "b"] }],
      [{}, "?partitionKey=customer-7", { messages: ["c"] }],
      [{}, "", { messages: ["d", "e", "f"], partitionKey: "customer-7" }],
    ] as const) {
      const res = await produce(s, "orders", JSON.stringify(body), headers, query);
      expect(res.status).toBe(201);
      const answer = (await res.json()) as ProduceResponse;
      expect(answer.partition).toBe(expected);
      expect(answer.count).toBe(body.messages.length);
    }
    // In that partition, an ordinary queue, in order.
    const consumer = await QueueConsumer.open(partitionName("orders", expected), "check", { driver: fsDriver({ dir: s.dir }) });
    expect((await consumer.read({ max: 10 })).map((m) => m.data)).toEqual(["a", "b", "c", "d", "e", "f"]);
    await consumer.close();
  });

  it("refuses two partition keys, bad ones, and a key for an ordinary queue", async () => {
    const s = await startServer({ queues: { orders: { partitions: 2 } } });
    const cases: [Record<string, string>, string, string][] = [
      [{ "partition-key": "a" }, "?partitionKey=b", '{"message":"x"}'],
      [{ "partition-key": "a" }, "", '{"message":"x","partitionKey":"b"}'],
      [{}, "?partitionKey=", '{"message":"x"}'],
      [{}, "", '{"message":"x","partitionKey":3}'],
      [{}, `?partitionKey=${"k".repeat(1025)}`, '{"message":"x"}'],
    ];
    for (const [headers, query, body] of cases) {
      const res = await produce(s, "orders", body, headers, query);
      expect(res.status, `${JSON.stringify(headers)} ${query} ${body}`).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
    const ordinary = await produce(s, "plain", '{"message":"x"}', { "partition-key": "a" });
    expect(ordinary.status).toBe(400);
    expect(((await ordinary.json()) as { error: { message: string } }).error.message).toMatch(/not partitioned/);
  });

  it("an idempotency key picks the partition (a retry lands once); a queue declared while the server runs is seen", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/late/messages", "x").then((r) => expect(r.status).toBe(201));
    expect((await put(s, "events", JSON.stringify({ partitions: 3 }))).status).toBe(201);
    const first = await produce(s, "events", '{"messages":["once"]}', { "idempotency-key": "k-1" });
    const again = await produce(s, "events", '{"messages":["once"]}', { "idempotency-key": "k-1" });
    expect(first.status).toBe(201);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    const a = (await first.json()) as ProduceResponse;
    expect(a.partition).toBe(partitionOfKey("k-1", 3));
    expect(await again.json()).toEqual(a);
    // Declared by another process (the CLI, another server): seen within a second.
    await declarePartitions(fsDriver({ dir: s.dir }), "other", 2);
    await new Promise((r) => setTimeout(r, 1100));
    const keyed = await produce(s, "other", '{"message":"x"}', { "partition-key": "z" });
    expect(keyed.status).toBe(201);
    expect(((await keyed.json()) as ProduceResponse).partition).toBe(partitionOfKey("z", 2));
  });

  it("the client sends partitionKey", async () => {
    const s = await startServer({ queues: { orders: { partitions: 5 } } });
    const client = createClient({ baseURL: s.url });
    const answer = await client.produce("orders", ["é", "ü"], { partitionKey: "kéy" });
    expect(answer.partition).toBe(partitionOfKey("kéy", 5));
  });
});
