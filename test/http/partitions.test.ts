// Over 300 lines: the HTTP tests of partitioned queues, one server per test, sharing their helpers.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeBatch, decodeLeases, leaseToken } from "../../protocol/binary";
import { createClient, type ProduceResponse } from "../../client/index";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { declarePartitions, partitionName, partitionOfKey } from "../../src/partitions/declaration";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { configProblems } from "../../adapters/config-schema";
import { errorResponse } from "../../runtime/errors";
import { VQueueError } from "../../src/core/errors";
import { basic, errorCode, jsonHeaders, startServer } from "./_server";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";

const put = (s: { url: string }, queue: string, body: string, headers: Record<string, string> = jsonHeaders) =>
  fetch(`${s.url}/api/v1/queues/${queue}`, { method: "PUT", body, headers: { ...jsonHeaders, ...headers } });

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
    const s = await startServer({
      auth: {
        users: [
          { username: "rw", password: "p", admin: false },
          { username: "a", password: "p" },
        ],
      },
    });
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
    expect(() => createQueueHandler({ driver: memoryDriver(), queues: { q: { partitions: 0 } } })).toThrow(
      /queues\.q\.partitions 0: use an integer from 1 to 1024/,
    );
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
    await sleep(1100);
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

describe("partitioned queues over HTTP: consuming", () => {
  const produceKeyed = async (s: { url: string }, queue: string, key: string, messages: string[]) => {
    const res = await fetch(`${s.url}/api/v1/queues/${queue}/messages`, {
      method: "POST",
      body: JSON.stringify({ messages }),
      headers: { ...jsonHeaders, "partition-key": key },
    });
    expect(res.status).toBe(201);
    return ((await res.json()) as ProduceResponse).partition!;
  };
  type Consumed = { cursor: string | null; messages: { partition: number; data: string; cursor: string; part: number; offset: number }[] };
  const consume = async (s: { url: string }, path: string, init?: RequestInit): Promise<Consumed> => {
    const res = await fetch(`${s.url}/api/v1/queues/${path}`, init);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    return (await res.json()) as Consumed;
  };

  it("ordered: an answer holds limits.maxResponseBytes over all partitions (at least one message), the rest comes next", async () => {
    const s = await startServer({ queues: { big: { partitions: 4 } }, limits: { maxResponseBytes: 2500 } });
    const keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    for (const key of keys) await produceKeyed(s, "big", key, [key.repeat(1000), key.repeat(1000)]);
    for (const accept of ["application/json", "application/vnd.v-queue.batch"]) {
      const got: string[] = [];
      let commit = "";
      for (let calls = 0; got.length < 16; calls++) {
        expect(calls, `${accept}: ${got.length} of 16`).toBeLessThan(16);
        const res = await fetch(`${s.url}/api/v1/queues/big/consumers/${accept.length}/messages?max_messages=100${commit}`, { headers: { accept } });
        expect(res.status).toBe(200);
        const texts =
          accept === "application/json"
            ? ((await res.json()) as Consumed).messages.map((m) => m.data)
            : decodeBatch(new Uint8Array(await res.arrayBuffer()), undefined, true).map((r) => String(r.data));
        // 1000-byte bodies: two fit in 2500 bytes and a third may pass it (as an ordinary queue's read), never more.
        expect(texts.length).toBeGreaterThan(0);
        expect(texts.length).toBeLessThanOrEqual(3);
        got.push(...texts);
        commit = `&commit=${encodeURIComponent(res.headers.get("x-vq-cursor") ?? "")}`;
        if (accept === "application/json") commit = "";
      }
      expect(got.sort()).toEqual(keys.flatMap((k) => [k.repeat(1000), k.repeat(1000)]).sort());
    }
  });

  it("ordered: every partition, each key in order, messages with their partition and a composite cursor that commit takes", async () => {
    const s = await startServer({ queues: { orders: { partitions: 4 } } });
    const keys = ["a", "b", "c", "d", "e", "f"];
    const partitionOf = new Map<string, number>();
    for (let round = 0; round < 3; round++) for (const key of keys) partitionOf.set(key, await produceKeyed(s, "orders", key, [`${key}${round}`]));
    const first = await consume(s, "orders/consumers/c/messages?max_messages=100");
    expect(first.messages).toHaveLength(18);
    for (const m of first.messages) {
      expect(m.partition).toBe(partitionOf.get(m.data[0]!));
      expect(m.cursor).toMatch(new RegExp(`^p${m.partition}:\\d+\\.\\d+\\.\\d+$`));
    }
    for (const key of keys) expect(first.messages.filter((m) => m.data[0] === key).map((m) => m.data)).toEqual([`${key}0`, `${key}1`, `${key}2`]);
    const used = [...new Set(first.messages.map((m) => m.partition))].sort();
    expect(first.cursor).toBe(used.map((p) => first.messages.filter((m) => m.partition === p).at(-1)!.cursor).join(","));
    const commit = await fetch(`${s.url}/api/v1/queues/orders/consumers/c/commit`, {
      method: "POST",
      body: JSON.stringify({ cursor: first.cursor }),
      headers: jsonHeaders,
    });
    expect(commit.status).toBe(200);

    // Binary asked: VQP1, the same messages with their partitions, the composite cursor in x-vq-cursor.
    const res = await fetch(`${s.url}/api/v1/queues/orders/consumers/b/messages?max_messages=100`, { headers: { accept: "application/vnd.v-queue.batch" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/vnd.v-queue.batch");
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe("VQP1");
    // An ordinary batch reader refuses it; asked to read partitioned answers, it reads it.
    expect(() => decodeBatch(bytes)).toThrow(/does not start with "VQB1"/);
    const records = decodeBatch(bytes, undefined, true);
    expect(res.headers.get("x-vq-count")).toBe(String(records.length));
    const seen = (list: { partition?: number; part: number; offset: number; data: unknown }[]) =>
      list.map((m) => `${m.partition}/${m.part}/${m.offset}/${String(m.data)}`).sort();
    expect(seen(records)).toEqual(seen(first.messages));
    expect(res.headers.get("x-vq-cursor")).toBe(first.cursor);
    // Committed in every partition it named: the consumer's lag (per partition, on disk) is 0.
    await s.close();
    const driver = fsDriver({ dir: s.dir });
    for (const p of used) {
      const consumer = await QueueConsumer.open(partitionName("orders", p), "c", { driver, create: false });
      expect(await consumer.read({ max: 10 })).toEqual([]);
      await consumer.close();
    }
  });

  it("ordered: a long poll is woken by a produce to any partition; ?commit= takes a composite cursor; bad cursors are 400", async () => {
    const s = await startServer({ queues: { orders: { partitions: 3 } } });
    await produceKeyed(s, "orders", "x", ["one"]);
    const first = await consume(s, "orders/consumers/c/messages?max_messages=10");
    expect(first.messages.map((m) => m.data)).toEqual(["one"]);
    const parked = consume(s, `orders/consumers/c/messages?max_messages=10&timeout_ms=${WAKE_TIMEOUT_MS}&commit=${encodeURIComponent(first.cursor!)}`);
    await sleep(200);
    const started = performance.now();
    await produceKeyed(s, "orders", "y", ["two"]);
    expect((await parked).messages.map((m) => m.data)).toEqual(["two"]);
    expectEndedEarly(started);
    for (const bad of ["0.78.3", "p9:0.78.3", "p0:0.1.1,p0:0.1.1", "p0:nope"]) {
      const res = await fetch(`${s.url}/api/v1/queues/orders/consumers/c/commit?cursor=${encodeURIComponent(bad)}`, { method: "POST" });
      expect(res.status, bad).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
  });

  it("ordered: seek moves every partition (earliest, latest, a time) or those a composite cursor names; other targets are 400", async () => {
    const s = await startServer({ queues: { orders: { partitions: 3 } } });
    await produceKeyed(s, "orders", "x", ["x1", "x2"]);
    await produceKeyed(s, "orders", "y", ["y1"]);
    const seek = (to: unknown) =>
      fetch(`${s.url}/api/v1/queues/orders/consumers/c/seek`, { method: "POST", body: JSON.stringify({ to }), headers: jsonHeaders });
    const all = await consume(s, "orders/consumers/c/messages?max_messages=10");
    expect(all.messages.map((m) => m.data).sort()).toEqual(["x1", "x2", "y1"]);
    await fetch(`${s.url}/api/v1/queues/orders/consumers/c/commit?cursor=${encodeURIComponent(all.cursor!)}`, { method: "POST" });
    const back = await seek("earliest");
    expect(back.status).toBe(200);
    const { cursor } = (await back.json()) as { cursor: string };
    // Every partition written to (one never written to has nothing to move).
    const written = [...new Set(all.messages.map((m) => m.partition!))].sort().map((p) => `p${p}`);
    expect(cursor.split(",").map((entry) => entry.split(":")[0])).toEqual(written);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages.map((m) => m.data).sort()).toEqual(["x1", "x2", "y1"]);
    // To the message after x1, in x's partition alone.
    const x1 = all.messages.find((m) => m.data === "x1")!;
    expect(x1.cursor).toMatch(/^p\d+:/); // a partitioned message's cursor names its partition
    expect((await seek(x1.cursor)).status).toBe(200);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages.map((m) => m.data)).toEqual(["x2"]);
    expect((await seek({ time: Date.now() + 60_000 })).status).toBe(200);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages).toEqual([]);
    for (const bad of [{ part: 0, seq: 1 }, "0.0.0", "p7:0.0.0", 42]) {
      const res = await seek(bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
  });

  it("ordered: rewind hands out again what was not committed", async () => {
    const s = await startServer({ queues: { orders: { partitions: 2 } } });
    await produceKeyed(s, "orders", "k", ["a", "b"]);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages.map((m) => m.data)).toEqual(["a", "b"]);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages).toEqual([]);
    expect((await fetch(`${s.url}/api/v1/queues/orders/consumers/c/rewind`, { method: "POST" })).status).toBe(200);
    expect((await consume(s, "orders/consumers/c/messages?max_messages=10")).messages.map((m) => m.data)).toEqual(["a", "b"]);
  });

  it("shared: leases carry their partition and a token naming it, in JSON and in the binary framing (VQM1); ack, nack and extend take it; a token without it is 400", async () => {
    const s = await startServer({ queues: { jobs: { partitions: 3 } } });
    for (const key of ["a", "b", "c", "d"]) await produceKeyed(s, "jobs", key, [key]);
    const res = await fetch(`${s.url}/api/v1/queues/jobs/consumers/w/lease`, {
      method: "POST",
      body: '{"max":10}',
      headers: { ...jsonHeaders, accept: "application/vnd.v-queue.batch" },
    });
    expect(res.headers.get("content-type")).toBe("application/vnd.v-queue.batch");
    const binary = decodeLeases(new Uint8Array(await res.arrayBuffer()));
    expect(binary.records.map((r) => r.data).sort()).toEqual(["a", "b", "c", "d"]);
    expect(Math.abs(binary.now - Date.now())).toBeLessThan(60_000);
    const leased = { messages: binary.records.map((r) => ({ partition: r.partition!, data: r.data as string, lease: leaseToken(r) })) };
    for (const m of leased.messages) {
      expect(m.partition).toBe(partitionOfKey(m.data, 3));
      expect(m.lease).toMatch(new RegExp(`^p${m.partition}:\\d+\\.\\d+\\.\\d+$`));
    }
    const [first, second, ...rest] = leased.messages;
    const call = (action: string, body: unknown) =>
      fetch(`${s.url}/api/v1/queues/jobs/consumers/w/${action}`, { method: "POST", body: JSON.stringify(body), headers: jsonHeaders });
    const extended = await call("extend", { leases: [first!.lease], leaseMs: 60_000 });
    expect(((await extended.json()) as { extended: unknown[] }).extended).toHaveLength(1);
    const nacked = await call("nack", { leases: [second!.lease] });
    expect(await nacked.json()).toEqual({ nacked: 1, errors: [] });
    const acked = await call("ack", { leases: [first!.lease, ...rest.map((m) => m.lease)] });
    expect(await acked.json()).toEqual({ acked: 3, errors: [] });
    const bare = await call("ack", { leases: [second!.lease.slice(second!.lease.indexOf(":") + 1)] });
    expect(bare.status).toBe(400);
    expect(((await bare.json()) as { error: { message: string } }).error.message).toMatch(/must name its partition/);
    const again = (await consume(s, "jobs/consumers/w/lease", { method: "POST", body: '{"max":10}', headers: jsonHeaders })) as unknown as {
      messages: { data: string; lease: string }[];
    };
    expect(again.messages.map((m) => m.data)).toEqual([second!.data]);
    // The client asks for the binary answer, and gives each lease its partition.
    const client = createClient({ baseURL: s.url });
    await client.ack("jobs", "w", again.messages[0]!.lease);
    await produceKeyed(s, "jobs", "z", ["z"]);
    const viaClient = await client.lease("jobs", "w", { max: 5 });
    expect(viaClient.map((m) => [m.data, m.partition])).toEqual([["z", partitionOfKey("z", 3)]]);
    expect(
      (
        await client.ack(
          "jobs",
          "w",
          viaClient.map((m) => m.lease),
        )
      ).acked,
    ).toBe(1);
    const consumed = await client.consume("jobs", "ordered-too", { maxMessages: 10, format: "binary" });
    expect(consumed.messages.map((m) => m.partition).every((p) => typeof p === "number")).toBe(true);
    await client.commit("jobs", "ordered-too", consumed.cursor);
  });
});

describe("partitioned queues over HTTP: inspection", () => {
  it("a partitioned queue is listed once, with partitions and summed totals; its detail lists the partitions; metrics label them", async () => {
    const s = await startServer({ queues: { events: { partitions: 3 } }, monitor: { sampleMs: 100 } });
    const client = createClient({ baseURL: s.url });
    await client.produce("plain", "x");
    const landed = new Map<number, number>();
    for (const key of ["a", "b", "c", "d", "e"]) {
      const { partition } = await client.produce("events", [key, key], { partitionKey: key });
      landed.set(partition!, (landed.get(partition!) ?? 0) + 2);
    }
    await client.consume("events", "reader", { maxMessages: 3 }).then((r) => client.commit("events", "reader", r.cursor));
    expect((await client.queues()).queues).toEqual(["events", "plain"]);
    const info = await client.queue("events");
    expect(info).toMatchObject({ name: "events", messages: 10, partitions: 3, consumers: 1, parts: landed.size });
    expect(info.partitionQueues!.map((p) => [p.partition, p.messages])).toEqual([...landed].sort((a, b) => a[0] - b[0]));

    // The monitor: one row, summed (lag 7 = 10 - 3 committed).
    let overview = await client.overview();
    for (let i = 0; i < 50 && !overview.queues.find((q) => q.name === "events")?.consumers; i++) {
      await sleep(100);
      overview = await client.overview();
    }
    expect(overview.queues.map((q) => q.name)).toEqual(["events", "plain"]);
    expect(overview.queues[0]).toMatchObject({ name: "events", partitions: 3, messages: 10, maxLag: 7, maxLagConsumer: "reader" });
    const detail = await client.queueOverview("events", { history: 5 });
    expect(detail.parts).toEqual([]);
    expect(detail.partitions!.map((p) => [p.partition, p.name, p.messages])).toEqual(
      [...landed].sort((a, b) => a[0] - b[0]).map(([k, n]) => [k, `events.p${k}`, n]),
    );
    expect(detail.consumers.map((c) => [c.name, c.lag])).toEqual([["reader", 7]]);

    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    for (const [k, n] of landed) expect(metrics).toContain(`vqueue_queue_messages{queue="events",partition="${k}"} ${n}`);
    expect(metrics).not.toContain('vqueue_queue_messages{queue="events"}');
    expect(metrics).toContain('vqueue_queue_messages{queue="plain"} 1');
    expect(metrics).toMatch(/^vqueue_fenced_writes_total 0$/m);
    expect(metrics).toMatch(/^vqueue_writer_locks_lost_total 0$/m);
  });
});

describe("partitioned queues: server code and errors", () => {
  it("QueueHandler.produce writes a partitioned queue by partitionKey; push refuses it; a key on an ordinary queue is refused", async () => {
    const s = await startServer({ queues: { events: { partitions: 4 } } });
    const result = await s.handler.produce("events", ["a", "b"], { partitionKey: "user-1" });
    expect(result).toMatchObject({ count: 2, partition: partitionOfKey("user-1", 4) });
    await expect(s.handler.push("events", "x")).rejects.toMatchObject({ code: "E_OPTION" });
    await expect(s.handler.produce("plain", ["x"], { partitionKey: "k" })).rejects.toMatchObject({ code: "E_OPTION" });
    // Nothing to produce: refused on either kind, as the engine's produce does.
    await expect(s.handler.produce("plain", [])).rejects.toMatchObject({ code: "E_MESSAGE" });
    await expect(s.handler.produce("events", [])).rejects.toMatchObject({ code: "E_MESSAGE" });
  });

  it("DELETE of a partitioned queue closes this server's writer and consumers of it, removes every partition and the declaration", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    await client.declare("events", { partitions: 3 });
    for (const key of ["a", "b", "c"]) await client.produce("events", key, { partitionKey: key });
    const { cursor } = await client.consume("events", "c", { maxMessages: 10 });
    await client.commit("events", "c", cursor);
    await client.lease("events", "w", { max: 1 });
    const deleted = await client.deleteQueue("events");
    expect(deleted).toMatchObject({ queue: "events", deleted: true });
    expect(readdirSync(s.dir)).toEqual([]);
    await expect(client.queue("events")).rejects.toMatchObject({ status: 404 });
    // Gone here too: declared again with another count, and used.
    expect((await client.declare("events", { partitions: 2 })).created).toBe(true);
    expect((await client.produce("events", "x", { partitionKey: "a" })).partition).toBe(partitionOfKey("a", 2));
  });

  it("E_FENCED is a 503 with Retry-After, not logged as a fault", async () => {
    const logged: unknown[] = [];
    const res = errorResponse(new VQueueError("E_FENCED", "taken over"), { error: (...args: unknown[]) => logged.push(args) });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(await res.json()).toEqual({ error: { code: "E_FENCED", message: "taken over" } });
    expect(logged).toEqual([]);
  });
});
