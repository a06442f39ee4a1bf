import { afterEach, describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { BATCH_CONTENT_TYPE, createQueueHandler, type QueueAppOptions, type QueueHandler } from "../../runtime/index";
import { resolveCors } from "../../runtime/cors";
import { produceExtras } from "../../client/produce";

const PAGE = "https://app.example";
const OTHER = "https://evil.example";
const auth = { users: [{ username: "web", password: "pa:ss" }] };
const credentials = { authorization: `Basic ${btoa("web:pa:ss")}` };

const handlers: QueueHandler[] = [];
afterEach(async () => {
  for (const h of handlers.splice(0)) await h.close();
});

function app(options: QueueAppOptions): (path: string, init?: RequestInit) => Promise<Response> {
  const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none", ...options });
  handlers.push(handler);
  return (path, init) => handler.fetch(new Request(`http://vq.local${path}`, init));
}

/** A comma-separated header as its items, lower-cased. */
const items = (res: Response, name: string) =>
  (res.headers.get(name) ?? "")
    .split(",")
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
const corsHeaders = (res: Response) => [...res.headers.keys()].filter((name) => name.startsWith("access-control-"));
const preflight = (origin: string, method = "POST") => ({
  method: "OPTIONS",
  headers: { origin, "access-control-request-method": method, "access-control-request-headers": "authorization, content-type" },
});

describe("CORS", () => {
  it("is off unless configured: no CORS headers, a preflight is a wrong method", async () => {
    const call = app({});
    expect(corsHeaders(await call("/api/v1/queues", { headers: { origin: PAGE } }))).toEqual([]);
    const res = await call("/api/v1/queues/q/messages", preflight(PAGE));
    expect(res.status).toBe(405);
    expect(corsHeaders(res)).toEqual([]);
  });

  it("answers an allowed origin's preflight: that origin, the API's methods and headers, max-age", async () => {
    const call = app({ cors: { origin: [PAGE], maxAge: 120 }, auth });
    const res = await call("/api/v1/queues/q/messages", preflight(PAGE));
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe(PAGE);
    expect(items(res, "access-control-allow-methods")).toEqual(["get", "head", "put", "post", "delete", "options"]);
    expect(items(res, "access-control-allow-headers")).toEqual([
      "authorization",
      "content-type",
      "accept",
      "idempotency-key",
      "partition-key",
      "last-event-id",
      "message-priority",
      "message-max-deliveries",
      "message-backoff",
      "message-group",
    ]);
    expect(res.headers.get("access-control-max-age")).toBe("120");
    expect(items(res, "vary")).toContain("origin");
    // No credentials asked of a preflight (browsers send none).
    expect(res.headers.get("www-authenticate")).toBeNull();
    expect(await app({ cors: { origin: [PAGE] } })("/health", preflight(PAGE, "GET")).then((r) => r.headers.get("access-control-max-age"))).toBe("600");
  });

  it("puts its headers on every answer to an allowed origin, errors included, keeping theirs", async () => {
    const call = app({ cors: { origin: [PAGE] }, auth });
    const expectCors = (res: Response) => {
      expect(res.headers.get("access-control-allow-origin")).toBe(PAGE);
      // x-vq-missed too: a page's binary consume must see what retention deleted before it read it.
      // idempotency-replayed: a page's produce retry can tell it was answered from the first one.
      expect(items(res, "access-control-expose-headers")).toEqual(["x-vq-cursor", "x-vq-count", "x-vq-missed", "idempotency-replayed", "retry-after"]);
      expect(items(res, "vary")).toContain("origin");
    };
    let res = await call("/api/v1/queues", { headers: { origin: PAGE } });
    expect(res.status).toBe(401);
    expectCors(res);
    expect(res.headers.get("www-authenticate")).toBe('Basic realm="v-queue", charset="UTF-8"');
    expect((await res.json()).error.code).toBe("E_AUTH");

    res = await call("/api/v1/queues", { method: "PUT", headers: { origin: PAGE } });
    expect(res.status).toBe(405);
    expectCors(res);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    expect((await res.json()).error.code).toBe("E_METHOD");

    res = await call("/api/v1/nothing", { headers: { origin: PAGE } });
    expect(res.status).toBe(404);
    expectCors(res);

    res = await call("/api/v1/queues/a..b", { headers: { origin: PAGE, ...credentials } });
    expect(res.status).toBe(400);
    expectCors(res);

    res = await call("/api/v1/queues/q/messages", { method: "POST", body: "hi", headers: { origin: PAGE, ...credentials } });
    expect(res.status).toBe(201);
    expectCors(res);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);

    // The binary batch's cursor and count are in headers: exposed, so a page can read them.
    res = await call("/api/v1/queues/q/consumers/c/messages", { headers: { origin: PAGE, accept: BATCH_CONTENT_TYPE, ...credentials } });
    expect(res.status).toBe(200);
    expectCors(res);
    expect(res.headers.get("x-vq-count")).toBe("1");
    expect(res.headers.get("x-vq-cursor")).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it("allows every header the client sends with a produce: a page may produce with priorities, groups and the rest", async () => {
    const { headers } = produceExtras({ priority: 3, maxDeliveries: 2, backoff: { type: "fixed", delayMs: 10 }, group: "g", idempotencyKey: "k" });
    const asked = ["content-type", ...Object.keys(headers)];
    const res = await app({ cors: { origin: [PAGE] } })("/api/v1/queues/q/messages", {
      method: "OPTIONS",
      headers: { origin: PAGE, "access-control-request-method": "POST", "access-control-request-headers": asked.join(", ") },
    });
    expect(res.status).toBe(204);
    expect(items(res, "access-control-allow-headers")).toEqual(expect.arrayContaining(asked));
  });

  it("gives another origin no CORS headers at all, and no preflight", async () => {
    const call = app({ cors: { origin: [PAGE] } });
    let res = await call("/api/v1/queues", { headers: { origin: OTHER } });
    expect(res.status).toBe(200);
    expect(corsHeaders(res)).toEqual([]);
    expect(res.headers.get("vary")).toBeNull();
    res = await call("/api/v1/queues/q/messages", preflight(OTHER));
    expect(res.status).toBe(405);
    expect(corsHeaders(res)).toEqual([]);
    // Nor a same-origin (or non-browser) call, which sends no Origin.
    expect(corsHeaders(await call("/api/v1/queues"))).toEqual([]);
  });

  it('with "*" allows any origin as "*", still varying on Origin (none: no CORS headers)', async () => {
    const call = app({ cors: { origin: "*" } });
    for (const origin of [PAGE, OTHER]) {
      const res = await call("/api/v1/queues", { headers: { origin } });
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(items(res, "vary")).toContain("origin");
      const pre = await call("/api/v1/queues/q/messages", preflight(origin));
      expect(pre.status).toBe(204);
      expect(pre.headers.get("access-control-allow-origin")).toBe("*");
      expect(items(pre, "vary")).toContain("origin");
    }
    expect(corsHeaders(await call("/api/v1/queues"))).toEqual([]);
  });

  it("asks a predicate, and answers with the origin it allowed", async () => {
    const call = app({ cors: { origin: (origin) => origin.endsWith(".app.example") } });
    const res = await call("/api/v1/queues", { headers: { origin: "https://eu.app.example" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("https://eu.app.example");
    expect(corsHeaders(await call("/api/v1/queues", { headers: { origin: PAGE } }))).toEqual([]);
  });

  it("checks the option: origins as scheme and host only", () => {
    expect(resolveCors(undefined)).toBeUndefined();
    expect(resolveCors(false)).toBeUndefined();
    expect(resolveCors({ origin: [PAGE, "http://127.0.0.1:3000"] })).toEqual({ origin: [PAGE, "http://127.0.0.1:3000"] });
    for (const origin of [[`${PAGE}/`], ["app.example"], [`${PAGE}/path`], "https://one.example"]) {
      expect(() => resolveCors({ origin } as never), JSON.stringify(origin)).toThrow(/Invalid `cors.origin`/);
    }
  });
});
