import { describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { errorCode, jsonHeaders, startServer } from "./_server";

const data = async (res: Response): Promise<string[]> => ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);

describe("POST /api/v1/queues/{queue}/consumers/{consumer}/seek", () => {
  it("moves a consumer to the oldest message, the end, a cursor or a message by part and sequence, and saves it", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["a", "b", "c", "d"] }), jsonHeaders);
    const poll = () => s.get("/api/v1/queues/q/consumers/c/messages?max_messages=10&timeout_ms=0");
    const first = (await (await poll()).json()) as { messages: { data: string; cursor: string }[] };
    expect(first.messages.map((m) => m.data)).toEqual(["a", "b", "c", "d"]);
    const seek = (to: unknown) => s.post("/api/v1/queues/q/consumers/c/seek", JSON.stringify({ to }), jsonHeaders);

    let res = await seek("earliest");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ queue: "q", consumer: "c", cursor: "0.0.0" });
    expect(await data(await poll())).toEqual(["a", "b", "c", "d"]);
    expect((await seek({ part: 0, seq: 3 })).status).toBe(200);
    expect(await data(await poll())).toEqual(["c", "d"]);
    expect((await seek(first.messages[0]!.cursor)).status).toBe(200);
    expect(await data(await poll())).toEqual(["b", "c", "d"]);
    expect((await seek("latest")).status).toBe(200);
    expect(await data(await poll())).toEqual([]);

    // Saved: what the consumers list shows, and where the next consume starts.
    await seek({ part: 0, seq: 2 });
    const consumers = (await (await s.get("/api/v1/queues/q/consumers")).json()) as { consumers: { name: string; count_popped: number }[] };
    expect(consumers.consumers.find((c) => c.name === "c")?.count_popped).toBe(1);

    for (const bad of ["nowhere", { part: 0 }, { part: -1, seq: 1 }, 12]) {
      res = await seek(bad);
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
    res = await s.post("/api/v1/queues/q/consumers/c/seek", "{", jsonHeaders);
    expect(await errorCode(res)).toBe("E_BODY");
    for (const missing of ["0.3.1", { part: 0, seq: 9 }, { part: 4, seq: 1 }]) {
      res = await seek(missing);
      expect(res.status, JSON.stringify(missing)).toBe(409);
      expect(await errorCode(res)).toBe("E_CURSOR");
    }
  });

  it("the client's seek()", async () => {
    const s = await startServer();
    const vq = createClient({ baseURL: s.url });
    await vq.produce("q", ["a", "b"]);
    expect((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages.map((m) => m.data)).toEqual(["a", "b"]);
    expect(await vq.seek("q", "c", { part: 0, seq: 2 })).toMatchObject({ queue: "q", consumer: "c" });
    expect((await vq.consume("q", "c", { maxMessages: 10, timeoutMs: 0 })).messages.map((m) => m.data)).toEqual(["b"]);
  });
});
