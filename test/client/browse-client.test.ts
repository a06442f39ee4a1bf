import { describe, expect, it } from "vitest";
import { createClient, VQueueClientError, type BrowseResult } from "../../client/index";
import { startServer } from "../http/_server";
import { sleep } from "../helpers/sleep";

describe("client: browse", () => {
  it("pages through a queue without any consumer: text, parsed JSON, bytes; every kind of start", async () => {
    const s = await startServer();
    const vq = createClient({ baseURL: s.url });
    await vq.produce("q", ["a", { n: 1 }, new Uint8Array([0, 255])]);
    const first: BrowseResult = await vq.browse("q", { limit: 2 });
    expect(first.messages.map((m) => m.data)).toEqual(["a", '{"n":1}']);
    expect(first.next).toBe(first.messages[1]!.cursor);
    const rest = await vq.browse("q", { from: first.next! });
    expect(rest.messages.map((m) => m.data)).toEqual([new Uint8Array([0, 255])]);
    expect(rest.next).toBeNull();
    const parsed = await vq.browse<{ n: number }>("q", { from: { part: 0, seq: 2 }, limit: 1, json: true });
    const message = parsed.messages[0]!;
    expect(message.type === "string" && message.json === true && message.data.n).toBe(1);
    expect((await vq.browse("q", { from: "latest", limit: 1 })).messages.map((m) => m.seq)).toEqual([3]);
    expect((await vq.browse("q", { from: { time: new Date(Date.now() - 60_000) } })).messages).toHaveLength(3);
    expect((await vq.browse("q", { maxBytes: 1 })).messages).toHaveLength(1);
    expect((await vq.consumers("q")).consumers).toEqual([]);
    const error = await vq.browse("q", { limit: 5000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VQueueClientError);
    expect(error).toMatchObject({ status: 400, code: "E_PARAM" });
    await expect(vq.browse("absent")).rejects.toMatchObject({ status: 404, code: "E_NOT_FOUND" });
  });
});

describe("client: browsing a dead-letter queue", () => {
  it("shows the newest dead letters, and leaves them where they are", async () => {
    const s = await startServer();
    const vq = createClient({ baseURL: s.url });
    await vq.produce("jobs", ["one", "two", "three"]);
    const leased = await vq.lease("jobs", "w", { max: 3 });
    await vq.nack(
      "jobs",
      "w",
      leased.map((m) => m.lease),
      { deadLetter: true, error: "bad input" },
    );
    const page = await vq.browse<{ error?: string }>("jobs.dead", { from: "latest", limit: 2, json: true });
    expect(page.messages).toHaveLength(2);
    expect(page.messages.map((m) => (m.json ? m.data.error : undefined))).toEqual(["bad input", "bad input"]);
    expect(page.next).toBeNull();
    expect((await vq.browse("jobs.dead")).messages).toHaveLength(3);
    expect((await vq.queue("jobs.dead")).messages).toBe(3);
    expect((await vq.consumers("jobs.dead")).consumers).toEqual([]);
  });
});

describe("client: overview and queueOverview", () => {
  it("reads the monitor's overview of every queue and of one, with history, typed with the protocol's shapes", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 } });
    const vq = createClient({ baseURL: s.url });
    await vq.produce("orders", ["a", "b", "c"]);
    await vq.consume("orders", "c", { maxMessages: 1 });
    await vq.commit("orders", "c");
    let overview = await vq.overview();
    for (let i = 0; i < 50 && overview.queues.find((q) => q.name === "orders")?.maxLag !== 2; i++) {
      await sleep(50);
      overview = await vq.overview({ history: 5 });
    }
    expect((await vq.overview()).queues.find((q) => q.name === "orders")?.history).toBeUndefined();
    overview = await vq.overview({ history: 5 });
    const orders = overview.queues.find((q) => q.name === "orders")!;
    expect(orders).toMatchObject({ messages: 3, maxLag: 2, maxLagConsumer: "c", rights: ["read", "write", "admin"] });
    expect(overview.user).toBeNull();
    expect(orders.history?.t.length).toBeGreaterThan(0);
    const detail = await vq.queueOverview("orders", { history: 3 });
    expect(detail.queue.name).toBe("orders");
    expect(detail.parts.map((p) => [p.id, p.messages])).toEqual([[0, 3]]);
    expect(detail.consumers.map((c) => [c.name, c.kind, c.lag])).toEqual([["c", "ordered", 2]]);
    await expect(vq.queueOverview("absent")).rejects.toMatchObject({ status: 404, code: "E_NOT_FOUND" });
    await expect(vq.overview({ history: -1 })).rejects.toMatchObject({ status: 400, code: "E_PARAM" });
  });
});
