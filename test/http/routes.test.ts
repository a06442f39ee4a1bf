import { startServer } from "./_server";
import { afterAll, describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { resolveQueueAppOptions } from "../../runtime/options";
import { ServerMetrics } from "../../runtime/metrics/server-metrics";
import { QueueRegistry } from "../../runtime/registry";
import { Monitor } from "../../runtime/monitor";
import { allowedMethods, pathRegExp } from "../../runtime/route";
import { apiRoutes } from "../../runtime/routes";
import { Tracing } from "../../runtime/tracing";

/** Every route of the API and what `Allow` says on its path: the table must hold exactly these. */
const ALLOW: Record<string, string> = {
  "/health": "GET, HEAD",
  "/api/v1/openapi.json": "GET, HEAD",
  "/api/v1/queues": "GET, HEAD",
  "/api/v1/queues/:queue": "GET, PUT, DELETE, HEAD",
  "/api/v1/queues/:queue/purge": "POST",
  "/api/v1/queues/:queue/messages": "POST",
  "/api/v1/queues/:queue/consumers": "GET, HEAD",
  "/api/v1/queues/:queue/consumers/:consumer": "DELETE",
  // No HEAD: it would hand messages out and drop them.
  "/api/v1/queues/:queue/consumers/:consumer/messages": "GET",
  "/api/v1/queues/:queue/consumers/:consumer/commit": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/rewind": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/seek": "POST",
  "/api/v1/queues/:queue/prune": "POST",
  "/api/v1/queues/:queue/schedules": "GET, HEAD",
  "/api/v1/queues/:queue/schedules/:schedule": "PUT, DELETE",
  "/api/v1/queues/:queue/consumers/:consumer/lease": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/ack": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/nack": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/extend": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/backoff": "POST",
  "/api/v1/queues/:queue/consumers/:consumer/progress": "POST",
  // No HEAD: it would open a stream.
  "/api/v1/queues/:queue/consumers/:consumer/events": "GET",
  "/api/v1/queues/:queue/consumers/:consumer/outcome": "GET, HEAD",
  "/api/v1/queues/:queue/redrive": "POST",
  "/metrics": "GET, HEAD",
  "/api/v1/overview": "GET, HEAD",
  "/api/v1/queues/:queue/overview": "GET, HEAD",
  "/": "GET, HEAD",
  "/_dashboard/:asset": "GET, HEAD",
  "/api/v1/queues/:queue/browse": "GET, HEAD",
};
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

const options = resolveQueueAppOptions({ driver: memoryDriver({}) });
const registry = new QueueRegistry(options);
const routes = apiRoutes({ registry, options, monitor: new Monitor(registry, options.monitor), metrics: new ServerMetrics(), tracing: new Tracing("0") });
const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none" });
afterAll(() => Promise.all([registry.close(), handler.close()]));

const example = (route: string) => route.replace(":queue", "q").replace(":consumer", "c");
const call = (method: string, path: string) => handler.fetch(new Request(`http://vq.local${path}`, { method, body: method === "POST" ? "x" : undefined }));

describe("the route table", () => {
  it("holds each route once, all of them", () => {
    expect(routes.map((r) => `${r.method} ${r.route}`)).toHaveLength(new Set(routes.map((r) => `${r.method} ${r.route}`)).size);
    expect([...new Set(routes.map((r) => r.route))].sort()).toEqual(Object.keys(ALLOW).sort());
    for (const [route, allow] of Object.entries(ALLOW)) {
      expect(allowedMethods(routes.filter((r) => r.route === route)).join(", "), route).toBe(allow);
    }
  });

  it("registers every route: its method reaches the handler", async () => {
    for (const route of routes) {
      const res = await call(route.method, `${example(route.route)}?timeout_ms=0`);
      const body = res.headers.get("content-type")?.startsWith("application/json") ? await res.json() : {};
      // Its own answer (maybe 404 E_NOT_FOUND, 401...), not the table's 404 or 405.
      expect(body.error?.code ?? "", `${route.method} ${route.route}`).not.toMatch(/^E_(ROUTE|METHOD)$/);
    }
  });

  it("answers HEAD wherever Allow names it, as the GET does, with no body over HTTP", async () => {
    const s = await startServer();
    for (const [route, allow] of Object.entries(ALLOW)) {
      if (!allow.includes("HEAD")) continue;
      const path = example(route);
      const [get, head] = [await s.get(path), await s.get(path, { method: "HEAD" })];
      expect(head.status, path).toBe(get.status);
      expect(head.headers.get("content-type"), path).toBe(get.headers.get("content-type"));
      expect(await head.text(), path).toBe("");
    }
  });

  it("answers every other method on every route with a JSON 405 and its Allow", async () => {
    for (const [route, allow] of Object.entries(ALLOW)) {
      const path = example(route);
      for (const method of METHODS.filter((m) => !allow.split(", ").includes(m))) {
        const res = await call(method, path);
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.headers.get("allow"), `${method} ${path}`).toBe(allow);
        if (method !== "HEAD") expect((await res.json()).error.code).toBe("E_METHOD");
      }
    }
    // A path of no route is a 404, whatever the method.
    for (const method of METHODS) expect((await call(method, "/api/v1/queues/q/else")).status).toBe(404);
  });

  it("matches a route's pattern on the path's end (the app mounted under a prefix) and one segment per parameter", () => {
    const re = pathRegExp("/api/v1/queues/:queue/consumers");
    expect(re.test("/api/v1/queues/q/consumers")).toBe(true);
    expect(re.test("/mq/api/v1/queues/q/consumers")).toBe(true);
    expect(re.test("/api/v1/queues/q/x/consumers")).toBe(false);
    expect(re.test("/api/v1/queues/q/consumers/c")).toBe(false);
    expect(pathRegExp("/api/v1/openapi.json").test("/api/v1/openapiXjson")).toBe(false);
  });

  it("is what the OpenAPI document lists: exactly the registered routes, with their path parameters", async () => {
    const doc = await (await call("GET", "/api/v1/openapi.json")).json();
    const listed = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
      Object.keys(item)
        .filter((key) => key !== "parameters")
        .map((method) => `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ":$1")}`),
    );
    expect(listed.sort()).toEqual(routes.map((r) => `${r.method} ${r.route}`).sort());
    for (const [path, item] of Object.entries(doc.paths as Record<string, { parameters?: { name: string; in: string }[] }>)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map(([, name]) => name);
      expect(item.parameters?.map((p) => `${p.in}:${p.name}`) ?? [], path).toEqual(names.map((name) => `path:${name}`));
    }
  });
});
