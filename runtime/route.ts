import type { H3, H3Event } from "h3";
import { authenticate, type Principal } from "./auth";
import { errorResponse, jsonError } from "./errors";
import type { ResolvedQueueAppOptions } from "./options";
import type { ServerMetrics, RouteSeries } from "./metrics/server-metrics";
import type { Monitor } from "./monitor";
import type { QueryParam } from "./query";
import type { QueueRegistry } from "./registry";
import type { Tracing } from "./tracing";

export interface RouteContext {
  registry: QueueRegistry;
  options: ResolvedQueueAppOptions;
  monitor: Monitor;
  /** The server's own series; undefined when `metrics` is off (nothing recorded). */
  metrics?: ServerMetrics;
  tracing: Tracing;
}

/** An OpenAPI operation object: what every route must say, and anything else the spec allows. */
export interface OpenAPIOperation {
  /** Unique in the table; camelCase. */
  operationId: string;
  summary: string;
  /** `[]` on a route served without auth. */
  security?: [];
  responses: Record<string, unknown>;
  [field: string]: unknown;
}

export type RouteHandler = (event: H3Event, principal: Principal | undefined) => Response | Promise<Response>;

/**
 * One row of the route table (`routes/index.ts`): registration, the 405 answers and the
 * OpenAPI document all come from it. Ours rather than h3's `defineRoute`, which (2.0.8)
 * drops `meta` and adds a validation wrapper we have no schema for.
 */
export interface ApiRoute {
  method: "GET" | "PUT" | "POST" | "DELETE";
  /** An h3 pattern: `:queue` and `:consumer` are also the OpenAPI path parameters. */
  route: string;
  /** The OpenAPI operation object (header parameters, requestBody, ...): a client generator names its function after `operationId`. */
  openapi: OpenAPIOperation;
  /** The query parameters the handler reads (each with its `read`): the document's query parameters, only from here. */
  query?: readonly QueryParam<unknown>[];
  handler: RouteHandler;
  /** `/health` only: no auth, not counted in (answers while the app closes), no error wrapping. */
  open?: true;
  /** Served without auth (yet counted in and wrapped, unlike `open`): `/metrics` with `metrics.open`. */
  noAuth?: true;
  /** A GET that HEAD must not stand for (a consume would hand messages out): `Allow` leaves HEAD out. */
  noHead?: true;
}

/**
 * Wraps an API handler: counts it in (graceful close waits for it), checks Basic auth, and
 * turns anything thrown into the JSON error body. Done here rather than in h3's `onError`
 * so it also holds when the app is mounted into another h3 app (which has its own). With
 * `series`, counts the answer's status and times it (until the response starts).
 */
export function apiHandler(ctx: RouteContext, route: Pick<ApiRoute, "handler" | "noAuth">, series?: RouteSeries): (event: H3Event) => Promise<Response> {
  const handle = async (event: H3Event) => {
    let done: (() => void) | undefined;
    try {
      const principal = ctx.options.auth && !route.noAuth ? await authenticate(event.req, ctx.options.auth) : undefined;
      done = ctx.registry.enter();
      return await route.handler(event, principal);
    } catch (error) {
      return errorResponse(error, ctx.options.logger);
    } finally {
      done?.();
    }
  };
  if (!series) return handle;
  return async (event) => {
    const start = performance.now();
    const response = await handle(event);
    series.record(response.status, (performance.now() - start) / 1000);
    return response;
  };
}

/** Registers every route of the table, then the JSON 405 (with `Allow`) and 404 for anything else. */
export function registerRoutes(app: H3, ctx: RouteContext, routes: ApiRoute[]): void {
  for (const route of routes) {
    const handler = (method: string) =>
      route.open ? (event: H3Event) => route.handler(event, undefined) : apiHandler(ctx, route, ctx.metrics?.route(method, route.route));
    app.on(route.method, route.route, handler(route.method));
    // A GET answers HEAD too, as `Allow` says (h3 does not route HEAD to GET): the server sends the headers only.
    if (route.method === "GET" && !route.noHead) app.on("HEAD", route.route, handler("HEAD"));
  }
  const patterns = routes.map((route) => ({ route, re: pathRegExp(route.route) }));
  app.all("/**", (event) => {
    const path = event.url.pathname;
    const allowed = allowedMethods(patterns.filter(({ re }) => re.test(path)).map(({ route }) => route));
    if (allowed.length > 0) {
      return jsonError(405, "E_METHOD", `Method ${event.req.method} is not allowed on ${path}: use ${allowed.join(", ")}.`, { allow: allowed.join(", ") });
    }
    return jsonError(404, "E_ROUTE", `No route for ${event.req.method} ${path}.`);
  });
}

/** The methods of the routes matching a path, HEAD after them when a GET stands for it. */
export function allowedMethods(matching: ApiRoute[]): string[] {
  const methods: string[] = [...new Set(matching.map((route) => route.method))];
  if (matching.some((route) => route.method === "GET" && !route.noHead)) methods.push("HEAD");
  return methods;
}

/**
 * A route's pattern as a RegExp on the path's end only: mounted under a prefix in another
 * h3 app, the path still carries that prefix.
 */
export function pathRegExp(route: string): RegExp {
  // The dashboard's page: not every path ending in "/".
  if (route === "/") return /^\/$/;
  const source = route
    .split("/")
    .map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
    .join("/");
  return new RegExp(`${source}$`);
}
