import { describe, expect, it } from "vitest";
import type { BrowseResponse } from "../../protocol/api";
import { basic, errorCode, jsonHeaders, startServer } from "./_server";

const produce = (s: Awaited<ReturnType<typeof startServer>>, messages: unknown[], headers: Record<string, string> = {}) =>
  s.post("/api/v1/queues/q/messages", JSON.stringify({ messages }), { ...jsonHeaders, ...headers });

describe("GET /api/v1/queues/{queue}/browse", () => {
  it("pages through the messages (text as text, bytes as base64) without moving or creating a consumer", async () => {
    const s = await startServer();
    await produce(s, ["a", '{"k":1}', 'ünï\n"q"']);
    await s.post("/api/v1/queues/q/messages", JSON.stringify({ messages: ["AP8="], encoding: "base64" }), jsonHeaders);
    const browse = async (query: string) => {
      const res = await s.get(`/api/v1/queues/q/browse${query}`);
      expect(res.status, query).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      return (await res.json()) as BrowseResponse;
    };
    const first = await browse("?limit=2");
    expect(first).toEqual({
      queue: "q",
      next: first.messages[1]!.cursor,
      messages: [
        { part: 0, offset: 0, seq: 1, type: "string", data: "a", cursor: "0.26.1" },
        { part: 0, offset: 26, seq: 2, type: "string", data: '{"k":1}', cursor: first.messages[1]!.cursor },
      ],
    });
    const second = await browse(`?from=${first.next}&limit=5`);
    expect(second.messages.map((m) => m.data)).toEqual(['ünï\n"q"', "AP8="]);
    expect(second.messages[1]).toMatchObject({ type: "object", encoding: "base64" });
    expect(second.next).toBeNull();
    expect((await browse("?from=latest&limit=1")).messages.map((m) => m.seq)).toEqual([4]);
    expect((await browse("?part=0&seq=3&limit=1")).messages.map((m) => m.seq)).toEqual([3]);
    expect((await browse(`?time=${Date.now() - 60_000}`)).messages).toHaveLength(4);
    expect((await browse(`?time=${new Date(Date.now() + 60_000).toISOString()}`)).messages).toEqual([]);
    expect((await browse("?max_bytes=1")).messages).toHaveLength(1);
    // No consumer came of it.
    const consumers = (await (await s.get("/api/v1/queues/q/consumers")).json()) as { consumers: unknown[] };
    expect(consumers.consumers).toEqual([]);
  });

  it("checks every parameter (400 E_PARAM saying what is allowed), 404 for no such queue, 409 for a cursor naming no message", async () => {
    const s = await startServer();
    let res = await s.get("/api/v1/queues/q/browse");
    expect(res.status).toBe(404);
    expect(await errorCode(res)).toBe("E_NOT_FOUND");
    await produce(s, ["a", "b"]);
    for (const query of [
      "from=oldest",
      "part=0",
      "seq=1",
      "part=-1&seq=1",
      "part=0&seq=0",
      "time=yesterday",
      "time=12:00",
      "from=latest&time=1",
      "from=earliest&from=latest",
      "limit=0",
      "limit=1001",
      "limit=x",
      "max_bytes=0",
      "max_bytes=999999999999",
    ]) {
      res = await s.get(`/api/v1/queues/q/browse?${query}`);
      expect(res.status, query).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code, query).toBe("E_PARAM");
      expect(body.error.message, query).toMatch(/use |expected /);
    }
    res = await s.get("/api/v1/queues/q/browse?from=0.5.1");
    expect(res.status).toBe(409);
    expect(await errorCode(res)).toBe("E_CURSOR");
    expect((await s.get("/api/v1/queues/bad%2Fname/browse")).status).toBe(400);
  });

  it("needs the read right on the queue", async () => {
    const users = [
      { username: "reader", password: "r", read: ["q"], write: true },
      { username: "writer", password: "w", read: false, write: true },
    ];
    const s = await startServer({ auth: { users } });
    await produce(s, ["a"], basic("writer", "w"));
    expect((await s.get("/api/v1/queues/q/browse", { headers: basic("reader", "r") })).status).toBe(200);
    const res = await s.get("/api/v1/queues/q/browse", { headers: basic("writer", "w") });
    expect(res.status).toBe(403);
    expect((await s.get("/api/v1/queues/q/browse")).status).toBe(401);
  });

  it("is in the OpenAPI document", async () => {
    const s = await startServer();
    const doc = (await (await s.get("/api/v1/openapi.json")).json()) as { paths: Record<string, { get?: { parameters: { name: string }[] } }> };
    expect(doc.paths["/api/v1/queues/{queue}/browse"]?.get?.parameters.map((p) => p.name)).toEqual([
      "from",
      "part",
      "seq",
      "partition",
      "time",
      "limit",
      "max_bytes",
    ]);
  });
});
