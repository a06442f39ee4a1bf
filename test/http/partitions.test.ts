import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
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
