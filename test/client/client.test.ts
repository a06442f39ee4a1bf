import { getEventListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, VQueueClientError, VQueueNetworkError, type ClientMessage } from "../../client/index";
import { freePort, startServerProcess, type ServerProcess } from "./_server-process";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess({
    auth: {
      users: [
        { username: "admin", password: "s3cret" },
        { username: "reader", password: "r", read: true, write: false },
      ],
    },
  });
}, 30_000);
afterAll(async () => {
  await server?.remove();
});

const admin = () => createClient({ baseURL: server.url, auth: { username: "admin", password: "s3cret" } });

describe("client SDK against the standalone server", () => {
  it("covers every endpoint with typed results", async () => {
    const client = admin();
    expect(await client.health()).toMatchObject({ status: "ok" });
    const produced = await client.produce("orders", ["text", { id: 1, tags: ["a"] }, 42, null]);
    expect(produced).toMatchObject({ queue: "orders", count: 4, first: { part: 0, seq: 1 }, last: { seq: 4 } });
    const bytes = Uint8Array.from([0, 1, 2, 253, 254, 255]);
    expect((await client.produce("orders", bytes)).count).toBe(1);
    expect((await client.produce("orders", [bytes, "mixed"], { format: "json" })).count).toBe(2);
    expect((await client.queues()).queues).toContain("orders");
    expect(await client.queue("orders")).toMatchObject({ name: "orders", id: 0, count_pushed: 7, messages: 7, parts: 1 });

    const first = await client.consume("orders", "billing", { maxMessages: 4 });
    expect(first.messages.map((m) => m.data)).toEqual(["text", '{"id":1,"tags":["a"]}', "42", "null"]);
    expect(first.messages.map((m) => m.type)).toEqual(["string", "string", "string", "string"]);
    expect(first.cursor).toBe(first.messages[3]!.cursor);
    await client.commit("orders", "billing", first.messages[1]!.cursor);
    let consumers = (await client.consumers("orders")).consumers;
    expect(consumers).toEqual([expect.objectContaining({ name: "billing", count_popped: 2, lag: 5 })]);

    await client.produce("events", [{ id: 1, tags: ["a"] }, [1, 2]]);
    const parsed = await client.consume<{ id: number }>("events", "parser", { maxMessages: 2, json: true });
    expect(parsed.messages.map((m) => m.data)).toEqual([{ id: 1, tags: ["a"] }, [1, 2]]);
    await client.consume("orders", "parser", { maxMessages: 2 });

    const binary = await client.consume("orders", "billing", { maxMessages: 10, format: "binary" });
    expect(binary.messages.map((m) => m.data)).toEqual([bytes, bytes, new TextEncoder().encode("mixed")]);
    expect(binary.messages.map((m) => m.type)).toEqual(["object", "object", "object"]);
    expect(binary.cursor).toBe(binary.messages.at(-1)!.cursor);
    await client.commit("orders", "billing");
    consumers = (await client.consumers("orders")).consumers;
    expect(consumers.find((c) => c.name === "billing")).toMatchObject({ count_popped: 7, lag: 0 });

    // Rewind: what was handed out but not committed comes again.
    const handed = await client.consume("orders", "parser", { maxMessages: 3 });
    expect(handed.messages.map((m) => m.seq)).toEqual([3, 4, 5]);
    await client.rewind("orders", "parser");
    expect((await client.consume("orders", "parser", { maxMessages: 1 })).messages[0]!.seq).toBe(1);

    expect(await client.deleteConsumer("orders", "parser")).toEqual({ queue: "orders", consumer: "parser", deleted: true });
    expect((await client.consumers("orders")).consumers.map((c) => c.name)).toEqual(["billing"]);
  });

  it("overview and queueOverview: the server monitor's shapes, history when asked, a missing queue as a 404 VQueueClientError", async () => {
    const client = admin();
    await client.produce("seen", ["a", "b"]);
    const overview = await client.overview({ history: 5 });
    expect(overview).toMatchObject({ user: "admin", rights: ["read", "write", "admin"] });
    expect(overview.queues.find((q) => q.name === "seen")).toMatchObject({
      messages: 2,
      parts: 1,
      consumers: 0,
      rights: ["read", "write", "admin"],
      history: { t: expect.any(Array) },
    });
    expect((await client.overview()).queues.find((q) => q.name === "seen")?.history).toBeUndefined();
    const read = await client.consume("seen", "c", { maxMessages: 1 });
    await client.commit("seen", "c", read.cursor);
    // From the monitor's last sample: the consumer shows from the next one (every second).
    await expect
      .poll(async () => (await client.queueOverview("seen")).consumers.find((c) => c.name === "c"), { timeout: 5000 })
      .toMatchObject({ kind: "ordered", lag: 1, cursor: read.cursor });
    const detail = await client.queueOverview("seen", { history: 3 });
    expect(detail.queue).toMatchObject({ name: "seen", history: { t: expect.any(Array) } });
    expect(detail.parts).toHaveLength(1);
    const missing = await client.queueOverview("never-made").catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(VQueueClientError);
    expect(missing).toMatchObject({ status: 404, code: "E_NOT_FOUND" });
  });

  it("purges and deletes a queue (the admin right), with the server's errors as VQueueClientError", async () => {
    const client = admin();
    await client.produce("doomed", ["a", "b"]);
    await client.consume("doomed", "c", { maxMessages: 1 });
    expect(await client.purge("doomed")).toEqual({ queue: "doomed", messages: 2, bytes: 52, parts: 1, part: 1 });
    await client.produce("doomed", "after");
    expect((await client.consume("doomed", "c")).messages.map((m) => m.data)).toEqual(["after"]);
    expect(await client.deleteQueue("doomed")).toEqual({ queue: "doomed", deleted: true, parts: 1, consumers: ["c"] });
    expect((await client.queues()).queues).not.toContain("doomed");
    await expect(client.deleteQueue("doomed")).rejects.toMatchObject({ status: 404, code: "E_NOT_FOUND" });
    const reader = createClient({ baseURL: server.url, auth: { username: "reader", password: "r" } });
    await expect(reader.purge("orders")).rejects.toMatchObject({ status: 403, code: "E_FORBIDDEN" });
  });

  it("json: true hands out text that is not JSON as text with its parse error, the rest of the batch parsed", async () => {
    const client = admin();
    await client.produce("mixed", ['{"id":1}', "plain text", new Uint8Array([7]), "[2]"], { format: "binary" });
    for (const format of ["json", "binary"] as const) {
      const { messages, cursor } = await client.consume<{ id: number } | number[]>("mixed", format, { maxMessages: 4, format, json: true });
      expect(messages.map((m) => m.json)).toEqual([true, false, undefined, true]);
      expect(messages.map((m) => m.data)).toEqual([{ id: 1 }, "plain text", Uint8Array.from([7]), [2]]);
      const text = messages[1]!;
      expect(text.type === "string" && !text.json && text.error).toBeInstanceOf(SyntaxError);
      expect(cursor).toBe(messages[3]!.cursor);
    }
    const controller = new AbortController();
    const seen: unknown[] = [];
    for await (const m of client.subscribe<{ id: number } | number[]>("mixed", "loop", { signal: controller.signal, json: true })) {
      seen.push(m.json ? m.data : m.type);
      if (seen.length === 4) controller.abort();
    }
    expect(seen).toEqual([{ id: 1 }, "string", "object", [2]]);
  });

  it("produce refuses what is not text, bytes or JSON, in either format, and pushes nothing", async () => {
    const client = admin();
    for (const format of ["json", "binary"] as const) {
      for (const bad of [new Date(0), { at: new Date(0) }, new Map(), [1, undefined], Number.NaN, undefined]) {
        // @ts-expect-error each is refused by the types too
        await expect(client.produce("strict", ["fine", bad], { format })).rejects.toThrow(TypeError);
      }
    }
    await expect(client.queue("strict")).rejects.toMatchObject({ status: 404 });
    expect((await client.produce("strict", { at: new Date(0).toISOString(), note: undefined })).count).toBe(1);
    expect((await client.consume("strict", "c")).messages[0]!.data).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
  });

  it("long-polls: waits for a message pushed later, and ends on the caller's abort", async () => {
    const client = admin();
    await client.produce("polls", "first");
    expect((await client.consume("polls", "c")).messages.map((m) => m.data)).toEqual(["first"]);
    const started = performance.now();
    const waiting = client.consume("polls", "c", { timeoutMs: WAKE_TIMEOUT_MS, maxMessages: 5 }).catch((e) => e);
    await sleep(200);
    await client.produce("polls", "late");
    const result = await waiting;
    expect(result.messages?.map((m: ClientMessage) => m.data)).toEqual(["late"]);
    expectEndedEarly(started);

    const controller = new AbortController();
    const aborted = client.consume("polls", "c", { timeoutMs: 10_000, signal: controller.signal }).catch((e: unknown) => e);
    setTimeout(() => controller.abort(), 100);
    const error = (await aborted) as Error;
    expect(error.name).toBe("AbortError");
  });

  it("types API errors and tells network errors apart", async () => {
    const anonymous = createClient({ baseURL: server.url });
    await expect(anonymous.queues()).rejects.toMatchObject({ name: "VQueueClientError", status: 401, code: "E_AUTH" });
    const wrong = createClient({ baseURL: server.url, auth: { username: "admin", password: "nope" } });
    await expect(wrong.queues()).rejects.toBeInstanceOf(VQueueClientError);
    const reader = createClient({ baseURL: server.url, auth: { username: "reader", password: "r" } });
    await expect(reader.produce("orders", "x")).rejects.toMatchObject({ status: 403, code: "E_FORBIDDEN" });
    await expect(admin().queue("no_such_queue")).rejects.toMatchObject({ status: 404, code: "E_NOT_FOUND" });
    await expect(admin().consume("orders", "bad;name")).rejects.toMatchObject({ status: 400, code: "E_NAME" });
    const down = createClient({ baseURL: `http://127.0.0.1:${await freePort()}` });
    const error = await down.health().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VQueueNetworkError);
    expect((error as VQueueNetworkError).timeout).toBe(false);
  });

  it("subscribes: receives messages pushed after it started, commits what the loop finished, stops on abort", async () => {
    const client = admin();
    const controller = new AbortController();
    const seen: unknown[] = [];
    const loop = (async () => {
      for await (const message of client.subscribe("live", "worker", { signal: controller.signal, pollTimeoutMs: 2000 })) {
        seen.push(message.data);
        if (seen.length === 3) controller.abort();
      }
    })();
    await sleep(300);
    // The queue does not exist yet: the subscriber waits for it.
    await client.produce("live", ["one", "two"]);
    await sleep(200);
    await client.produce("live", "three");
    await loop;
    expect(seen).toEqual(["one", "two", "three"]);
    const worker = (await client.consumers("live")).consumers.find((c) => c.name === "worker");
    expect(worker).toMatchObject({ count_popped: 3, lag: 0 });
  });

  it("subscribe: a throw in the loop body commits nothing past the message that failed", async () => {
    const client = admin();
    await client.produce("fragile", ["a", "b", "c", "d"]);
    const failing = (async () => {
      for await (const message of client.subscribe("fragile", "w")) if (message.data === "c") throw new Error("boom");
    })();
    await expect(failing).rejects.toThrow("boom");
    expect((await client.consumers("fragile")).consumers[0]).toMatchObject({ count_popped: 2 });
    const controller = new AbortController();
    const rest: unknown[] = [];
    for await (const message of client.subscribe("fragile", "w", { signal: controller.signal })) {
      rest.push(message.data);
      if (message.data === "d") controller.abort();
    }
    expect(rest).toEqual(["c", "d"]);
  });

  it("subscribe on a partitioned queue commits every partition's messages, and skips none after a break", async () => {
    const client = admin();
    await client.declare("spread", { partitions: 4 });
    const sent = Array.from({ length: 40 }, (_, i) => `m${i}`);
    for (const [i, m] of sent.entries()) await client.produce("spread", [m], { partitionKey: `k${i % 7}` });
    const seen: string[] = [];
    for await (const message of client.subscribe("spread", "w", { maxMessages: 6 })) {
      if (seen.length === 17) break; // mid-batch: this one comes again
      seen.push(message.data as string);
    }
    // What the first loop finished is committed in every partition it came from: lag is what is left.
    expect((await client.consumers("spread")).consumers.find((c) => c.name === "w")?.lag).toBe(sent.length - seen.length);
    const controller = new AbortController();
    for await (const message of client.subscribe("spread", "w", { signal: controller.signal, maxMessages: 6, pollTimeoutMs: 500 })) {
      seen.push(message.data as string);
      if (seen.length >= sent.length) controller.abort();
    }
    // Every message once: none skipped by a position of another partition, none twice.
    expect([...seen].sort()).toEqual([...sent].sort());
  });

  it('subscribe with commit: "message" saves each finished message before the next is handed out', async () => {
    const client = admin();
    await client.produce("each", ["a", "b", "c", "d"]);
    const popped: number[] = [];
    const failing = (async () => {
      for await (const message of client.subscribe("each", "w", { commit: "message", maxMessages: 10 })) {
        // What the server has saved when the body gets this message: every one before it.
        popped.push((await client.consumers("each")).consumers[0]?.count_popped ?? 0);
        if (message.data === "c") throw new Error("boom");
      }
    })();
    await expect(failing).rejects.toThrow("boom");
    expect(popped).toEqual([0, 1, 2]);
    expect((await client.consumers("each")).consumers[0]).toMatchObject({ count_popped: 2 });
  });

  it("subscribe fetches the next batch while the body works: a break loses none of it, a quiet queue still commits", async () => {
    const client = admin();
    await client.produce(
      "ahead",
      Array.from({ length: 10 }, (_, i) => `m${i}`),
    );
    const first: unknown[] = [];
    for await (const message of client.subscribe("ahead", "w", { maxMessages: 5 })) {
      if (message.data === "m3") break; // m5..m9 were already requested and handed out
      first.push(message.data);
    }
    expect(first).toEqual(["m0", "m1", "m2"]);
    expect((await client.consumers("ahead")).consumers[0]).toMatchObject({ count_popped: 3 });
    // The next loop gets everything after the last finished message, promptly.
    const controller = new AbortController();
    const rest: unknown[] = [];
    const started = performance.now();
    const loop = (async () => {
      for await (const message of client.subscribe("ahead", "w", { signal: controller.signal, maxMessages: 5, pollTimeoutMs: 30_000 })) rest.push(message.data);
    })();
    // Promptly: well before the 30 s poll timeout (room for a loaded machine).
    while (rest.length < 7 && performance.now() - started < 15_000) await sleep(20);
    expect(rest).toEqual(["m3", "m4", "m5", "m6", "m7", "m8", "m9"]);
    // Nothing more comes: the finished batch is committed while the next poll waits.
    await expect.poll(async () => (await client.consumers("ahead")).consumers[0]?.count_popped, { timeout: 10_000 }).toBe(10);
    expectEndedEarly(started, 30_000);
    controller.abort();
    await loop;
  });

  it("subscribe over many batches leaves no listener behind on the caller's signal", async () => {
    const client = admin();
    await client.produce(
      "many",
      Array.from({ length: 400 }, (_, i) => `m${i}`),
    );
    const controller = new AbortController();
    let seen = 0;
    let most = 0;
    for await (const _message of client.subscribe("many", "w", { signal: controller.signal, maxMessages: 10 })) {
      most = Math.max(most, getEventListeners(controller.signal, "abort").length);
      if (++seen === 400) controller.abort();
    }
    expect(seen).toBe(400);
    expect(most).toBeLessThanOrEqual(2);
  });

  it("subscribe survives a server crash and restart: nothing lost, nothing handed to the loop or committed twice", async () => {
    const commits: string[] = [];
    const recording: typeof fetch = async (input, init) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      // Commits go alone (POST .../commit) or with the next poll (?commit=<cursor>). Count those
      // the server answered whole: a commit whose request or answer died with the server (killed
      // between a poll's headers and the end of its body, say) is rightly sent again.
      const cursor = url.includes("/commit") ? JSON.parse(String(init?.body ?? "{}")).cursor : new URL(url).searchParams.get("commit");
      const response = await fetch(input, init);
      if (cursor && response.ok) {
        const whole = await response
          .clone()
          .arrayBuffer()
          .then(
            () => true,
            () => false,
          );
        if (whole) commits.push(cursor);
      }
      return response;
    };
    const client = createClient({ baseURL: server.url, auth: { username: "admin", password: "s3cret" }, fetch: recording });
    const total = 300;
    await client.produce(
      "durable",
      Array.from({ length: total }, (_, i) => `m${i}`),
    );
    const controller = new AbortController();
    const seen: string[] = [];
    let restarted: Promise<void> | undefined;
    let reconnects = 0;
    const options = { signal: controller.signal, maxMessages: 20, pollTimeoutMs: 500, backoff: { min: 50, max: 500 }, onReconnect: () => reconnects++ };
    for await (const message of client.subscribe("durable", "w", options)) {
      seen.push(message.data as string);
      if (seen.length === 100) restarted = server.restart("SIGKILL");
      if (seen.length === 150) await restarted;
      if (seen.length === total) controller.abort();
    }
    expect(reconnects).toBeGreaterThan(0);
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => `m${i}`));
    expect(commits.length).toBeGreaterThan(total / 20 - 5);
    expect(new Set(commits).size).toBe(commits.length);
    const w = (await client.consumers("durable")).consumers.find((c) => c.name === "w");
    expect(w).toMatchObject({ count_popped: total, lag: 0 });
  }, 60_000);
});
