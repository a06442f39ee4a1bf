import { describe, expect, it } from "vitest";
import { basic, errorCode, jsonHeaders, startServer } from "./_server";

const users = [
  { username: "admin", password: "s3cret" },
  { username: "reader", password: "r-pass", read: true, write: false },
  { username: "ordersWriter", password: "w-pass", read: false, write: ["orders"] },
];

describe("Basic auth and per-user rights", () => {
  it("leaves /health open, and asks every other route for credentials (401 + WWW-Authenticate)", async () => {
    const s = await startServer({ auth: { users } });
    expect((await s.get("/health")).status).toBe(200);
    const routes: [string, string][] = [
      ["GET", "/api/v1/queues"],
      ["GET", "/api/v1/openapi.json"],
      ["GET", "/api/v1/queues/orders"],
      ["GET", "/api/v1/queues/orders/consumers"],
      ["GET", "/api/v1/queues/orders/consumers/c/messages"],
      ["POST", "/api/v1/queues/orders/consumers/c/commit"],
      ["POST", "/api/v1/queues/orders/consumers/c/rewind"],
      ["POST", "/api/v1/queues/orders/messages"],
      ["DELETE", "/api/v1/queues/orders/consumers/c"],
      ["DELETE", "/api/v1/queues/orders"],
      ["POST", "/api/v1/queues/orders/purge"],
      ["POST", "/api/v1/queues/orders/consumers/c/lease"],
      ["POST", "/api/v1/queues/orders/consumers/c/ack"],
      ["POST", "/api/v1/queues/orders/consumers/c/nack"],
      ["POST", "/api/v1/queues/orders/consumers/c/extend"],
      ["POST", "/api/v1/queues/orders/consumers/c/backoff"],
      ["POST", "/api/v1/queues/orders/consumers/c/progress"],
      ["GET", "/api/v1/queues/orders/consumers/c/events"],
      ["GET", "/api/v1/queues/orders/consumers/c/outcome?part=0&offset=0"],
      ["POST", "/api/v1/queues/orders.dead/redrive"],
    ];
    for (const [method, path] of routes) {
      const res = await s.get(path, { method, body: method === "POST" ? "x" : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Basic realm="v-queue", charset="UTF-8"');
      expect(await errorCode(res)).toBe("E_AUTH");
    }
    // Nothing was created by the refused produce.
    const ok = await s.get("/api/v1/queues", { headers: basic("admin", "s3cret") });
    expect(await ok.json()).toEqual({ queues: [] });
  });

  it("refuses a wrong password, an unknown user and malformed credentials with 401", async () => {
    const s = await startServer({ auth: { users, realm: "vq-test" } });
    for (const headers of [
      basic("admin", "wrong"),
      basic("nobody", "s3cret"),
      basic("admin", "s3cre"),
      { authorization: "Basic !!!" },
      { authorization: `Basic ${btoa("nocolon")}` },
      { authorization: "Bearer abc" },
    ]) {
      const res = await s.get("/api/v1/queues", { headers });
      expect(res.status, JSON.stringify(headers)).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('realm="vq-test"');
    }
    expect((await s.get("/api/v1/queues", { headers: basic("admin", "s3cret") })).status).toBe(200);
  });

  it("gives 403 without the right: a reader cannot produce, a writer of one queue cannot read or write others", async () => {
    const s = await startServer({ auth: { users } });
    const admin = basic("admin", "s3cret");
    const reader = basic("reader", "r-pass");
    const writer = basic("ordersWriter", "w-pass");
    const post = (path: string, body: string, headers: Record<string, string>) =>
      s.get(path, { method: "POST", body, headers: { ...headers, ...jsonHeaders } });

    expect((await post("/api/v1/queues/orders/messages", '{"message":"by writer"}', writer)).status).toBe(201);
    let res = await post("/api/v1/queues/other/messages", '{"message":"x"}', writer);
    expect(res.status).toBe(403);
    expect(await errorCode(res)).toBe("E_FORBIDDEN");
    res = await post("/api/v1/queues/orders/messages", '{"message":"x"}', reader);
    expect(res.status).toBe(403);
    res = await s.get("/api/v1/queues/orders/consumers/c/messages", { headers: writer });
    expect(res.status).toBe(403);
    res = await s.get("/api/v1/queues/orders/consumers/c/messages", { headers: reader });
    expect(res.status).toBe(200);
    expect((await res.json()).messages[0].data).toBe("by writer");
    expect((await s.get("/api/v1/queues/orders/consumers/c/commit", { method: "POST", headers: reader })).status).toBe(200);
    expect((await s.get("/api/v1/queues/orders", { headers: writer })).status).toBe(403);
    expect((await s.del("/api/v1/queues/orders/consumers/c", { headers: writer })).status).toBe(403);
    // Deleting needs the admin right: a reader of the queue has none by default.
    res = await s.del("/api/v1/queues/orders/consumers/c", { headers: reader });
    expect(res.status).toBe(403);
    expect((await res.json()).error.message).toContain("no admin right");
    expect((await s.del("/api/v1/queues/orders/consumers/c", { headers: admin })).status).toBe(200);

    await post("/api/v1/queues/zzz/messages", '{"message":"x"}', admin);
    // The list shows each user the queues they have a right on.
    expect(await (await s.get("/api/v1/queues", { headers: writer })).json()).toEqual({ queues: ["orders"] });
    expect(await (await s.get("/api/v1/queues", { headers: reader })).json()).toEqual({ queues: ["orders", "zzz"] });
  });

  it("gives the admin right to users with full read and write rights unless said otherwise, and only on the queues listed", async () => {
    const s = await startServer({
      auth: {
        users: [
          { username: "full", password: "f" },
          { username: "noAdmin", password: "n", admin: false },
          { username: "ordersAdmin", password: "o", read: ["orders"], write: false, admin: ["orders"] },
        ],
      },
    });
    for (const queue of ["orders", "other"]) {
      await s.get(`/api/v1/queues/${queue}/messages`, { method: "POST", body: '{"message":"m"}', headers: { ...basic("full", "f"), ...jsonHeaders } });
      expect((await s.get(`/api/v1/queues/${queue}/consumers/c/messages`, { headers: basic("full", "f") })).status).toBe(200);
    }
    expect((await s.del("/api/v1/queues/orders/consumers/c", { headers: basic("noAdmin", "n") })).status).toBe(403);
    expect((await s.del("/api/v1/queues/other/consumers/c", { headers: basic("ordersAdmin", "o") })).status).toBe(403);
    expect((await s.del("/api/v1/queues/orders/consumers/c", { headers: basic("ordersAdmin", "o") })).status).toBe(200);
    expect((await s.del("/api/v1/queues/other/consumers/c", { headers: basic("full", "f") })).status).toBe(200);
  });

  it("is off with auth: false even when users are configured", async () => {
    const s = await startServer({ auth: { users, enabled: false } });
    expect((await s.get("/api/v1/queues")).status).toBe(200);
  });
});
