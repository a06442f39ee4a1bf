import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { expectEndedByTimeout, expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { jsonHeaders, startServer } from "./_server";
import { sleep } from "../helpers/sleep";

const poll = (timeoutMs: number, consumer = "c", max = 10) => `/api/v1/queues/q/consumers/${consumer}/messages?max_messages=${max}&timeout_ms=${timeoutMs}`;
const data = async (res: Response): Promise<string[]> => ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);

describe("long polling", () => {
  it("returns at once when messages are there", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "ready");
    const t = performance.now();
    expect(await data(await s.get(poll(WAKE_TIMEOUT_MS)))).toEqual(["ready"]);
    expectEndedEarly(t);
  });

  it("returns when a message is pushed, long before its timeout", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "old");
    await s.get(poll(0)); // hands out "old": the next poll has to wait
    const t = performance.now();
    const pending = s.get(poll(WAKE_TIMEOUT_MS));
    await sleep(300);
    await s.post("/api/v1/queues/q/messages", "new");
    expect(await data(await pending)).toEqual(["new"]);
    // It waited for the push (a sleep cannot end early), and the push, not the timeout, ended it.
    expect(performance.now() - t).toBeGreaterThanOrEqual(290);
    expectEndedEarly(t);
  });

  it("ends on its timeout with no messages", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const t = performance.now();
    const res = await s.get(poll(400));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ count: 0, cursor: null, messages: [] });
    expectEndedByTimeout(t, 400);
  });

  it("timeout_ms=0 (the default) answers at once when there is nothing", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const t = performance.now();
    expect(await data(await s.get("/api/v1/queues/q/consumers/c/messages"))).toEqual([]);
    // Not a long poll: it ends long before one that nothing wakes would (no bound of its own to meet).
    expectEndedEarly(t);
  });

  it("a client that disconnects cancels its wait, and no message is lost to it", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const controller = new AbortController();
    const aborted = s.get(poll(30_000), { signal: controller.signal }).catch((error: Error) => error.name);
    await sleep(200);
    controller.abort();
    expect(await aborted).toBe("AbortError");
    // Polls of one consumer are served one at a time: had the aborted wait gone on, this one
    // would queue behind it for 30 s.
    await sleep(300);
    const t = performance.now();
    expect(await data(await s.get(poll(0)))).toEqual([]);
    expectEndedEarly(t, 30_000);
    // A message pushed after the abort goes to the next poll.
    await s.post("/api/v1/queues/q/messages", "after-abort");
    expect(await data(await s.get(poll(0)))).toEqual(["after-abort"]);
  });

  it("serves two long polls of one consumer in turn, each with its own messages", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const a = s.get(poll(5000, "c", 1));
    const b = s.get(poll(5000, "c", 1));
    await sleep(100);
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["m1", "m2"] }), jsonHeaders);
    const got = [...(await data(await a)), ...(await data(await b))];
    expect(got.sort()).toEqual(["m1", "m2"]);
  });

  it("wakes many parked consumers at once with one push", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "seed");
    const n = 200;
    const consumers = Array.from({ length: n }, (_, i) => `c${i}`);
    await Promise.all(consumers.map((c) => s.get(poll(0, c)))); // each reads "seed"
    const polls = consumers.map((c) => s.get(poll(WAKE_TIMEOUT_MS, c)));
    await sleep(300);
    const t = performance.now();
    await s.post("/api/v1/queues/q/messages", "broadcast");
    const results = await Promise.all(polls.map(async (p) => data(await p)));
    expect(results).toEqual(consumers.map(() => ["broadcast"]));
    expectEndedEarly(t);
    const listed = await (await s.get("/api/v1/queues/q/consumers")).json();
    expect(listed.consumers).toHaveLength(n);
  });

  it("ends parked polls with no messages when the server closes, and the close waits for them", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const pending = s.get(poll(30_000));
    await sleep(100);
    const t = performance.now();
    await s.close();
    const res = await pending;
    expect(res.status).toBe(200);
    expect(await data(res)).toEqual([]);
    expectEndedEarly(t, 30_000);
  });

  it("a deleted consumer's parked poll gets 404", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    await s.get(poll(0));
    const pending = s.get(poll(30_000));
    await sleep(100);
    expect((await s.del("/api/v1/queues/q/consumers/c")).status).toBe(200);
    expect((await pending).status).toBe(404);
  });

  it("closes a consumer nobody used for consumerIdleMs (its lock is free), and reopens it on the next request", async () => {
    const s = await startServer({ consumerIdleMs: 150 });
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["a", "b"] }), jsonHeaders);
    expect(await data(await s.get(poll(0, "c", 1)))).toEqual(["a"]);
    await s.post("/api/v1/queues/q/consumers/c/commit");
    await sleep(600);
    // Another reader of the same name can take the lock now.
    const other = await QueueConsumer.open("q", "c", { driver: fsDriver({ dir: s.dir }), syncCommits: false });
    await other.close();
    expect(await data(await s.get(poll(0, "c", 1)))).toEqual(["b"]);
  });
});

describe("many long polls at once", () => {
  it("a thousand polls on their own consumers all wait (no 503 with the default options), and one push answers them all", async () => {
    const { createQueueHandler } = await import("../../runtime/index");
    const { default: memoryDriver } = await import("../../adapters/drivers/memory");
    const handler = createQueueHandler({
      driver: memoryDriver(),
      durability: "none",
      syncCommits: false,
      start: "latest",
      logger: { error: () => {}, warn: () => {} },
    });
    const url = (path: string) => `http://vq.test/api/v1/queues/${path}`;
    try {
      await handler.fetch(new Request(url("q/messages"), { method: "POST", body: "before", headers: { "content-type": "text/plain" } }));
      const polls = Array.from({ length: 1000 }, (_, i) => handler.fetch(new Request(url(`q/consumers/c${i}/messages?max_messages=10&timeout_ms=40000`))));
      await sleep(500);
      const t = performance.now();
      await handler.fetch(new Request(url("q/messages"), { method: "POST", body: "wake", headers: { "content-type": "text/plain" } }));
      const answers = await Promise.all(polls);
      expect(answers.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
      const got = await Promise.all(answers.map(data));
      expect(got.filter((d) => d.length !== 1 || d[0] !== "wake")).toEqual([]);
      expectEndedEarly(t, 40_000);
    } finally {
      await handler.close();
    }
  }, 60_000);
});
