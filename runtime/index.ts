/**
 * The v-queue HTTP API as an h3 (v2) app: web-standard Request -> Response, no Node built-ins.
 * Use it as `app.fetch(request)`, mount it into another h3 app, or serve it (`v-queue/server`).
 */
import { H3 } from "h3";
import type { MessageInput, MessagePosition } from "../src/message";
import { assertName } from "../src/names";
import { corsMiddleware } from "./cors";
import { jsonError } from "./errors";
import { requestLogMiddleware } from "./log";
import { openAPIDocument } from "./openapi";
import { resolveQueueAppOptions, type QueueAppOptions } from "./options";
import { QueueRegistry } from "./registry";
import { json } from "./request";
import { defineRoute, type RouteContext } from "./route";
import { registerConsumeRoutes } from "./routes/consume";
import { registerProduceRoutes } from "./routes/produce";
import { registerQueueRoutes } from "./routes/queues";
import type { HealthResponse } from "../protocol/api";

export type { AuthOptions, AuthUser, QueueAppLimits, QueueAppOptions } from "./options";
export type { CorsOptions } from "./cors";
export type { QueueAppLogger } from "./log";
export { DEFAULT_LIMITS } from "./options";
export type { HttpErrorCode } from "./errors";
export { BATCH_CONTENT_TYPE, decodeBatch, encodeBatch, encodeProduceBatch } from "../protocol/binary";
export type { BatchRecord } from "../protocol/binary";
export type { MessageJSON } from "../protocol/api";

/** The app and the handle that closes its queues. */
export interface QueueHandler {
  app: H3;
  fetch(request: Request): Promise<Response>;
  /**
   * Pushes to `queue` (created if missing) from server code, without HTTP and without auth,
   * through the same open writer as the API. Strings as text, bytes as `O` records, other
   * JSON values as their JSON text.
   */
  push(queue: string, messages: MessageInput | MessageInput[]): Promise<MessagePosition[]>;
  /** Ends long polls, waits for requests in flight (writes included), closes every queue file. */
  close(): Promise<void>;
}

const ROUTES: [RegExp, string][] = [
  [/\/health$/, "GET"],
  [/\/api\/v1\/openapi\.json$/, "GET"],
  [/\/api\/v1\/queues$/, "GET"],
  [/\/api\/v1\/queues\/[^/]+$/, "GET"],
  [/\/api\/v1\/queues\/[^/]+\/messages$/, "POST"],
  [/\/api\/v1\/queues\/[^/]+\/consumers$/, "GET"],
  [/\/api\/v1\/queues\/[^/]+\/consumers\/[^/]+$/, "DELETE"],
  [/\/api\/v1\/queues\/[^/]+\/consumers\/[^/]+\/messages$/, "GET"],
  [/\/api\/v1\/queues\/[^/]+\/consumers\/[^/]+\/commit$/, "POST"],
  [/\/api\/v1\/queues\/[^/]+\/consumers\/[^/]+\/rewind$/, "POST"],
];

/** Creates the app and its registry of open queues. */
export function createQueueHandler(options: QueueAppOptions = {}): QueueHandler {
  const resolved = resolveQueueAppOptions(options);
  const registry = new QueueRegistry(resolved);
  const ctx: RouteContext = { registry, options: resolved };
  const app = new H3({
    silent: true,
    // Only what escapes the route wrappers (h3's own errors) gets here.
    onError: (error) => {
      const status = (error as { status?: number }).status ?? 500;
      if (status >= 500) resolved.logger.error("[v-queue] [http]", error);
      return jsonError(status, status === 404 ? "E_ROUTE" : status >= 500 ? "E_INTERNAL" : "E_PARAM", status >= 500 ? "Internal server error (logged by the server)." : error.message);
    },
  });

  if (resolved.cors) app.use(corsMiddleware(resolved.cors));
  if (resolved.logRequests) app.use(requestLogMiddleware(resolved.logger));
  app.get("/health", () => json<HealthResponse>({ status: "ok", version: resolved.version }));
  app.get("/api/v1/openapi.json", defineRoute(ctx, () => json(openAPIDocument(resolved))));
  registerQueueRoutes(app, ctx);
  registerProduceRoutes(app, ctx);
  registerConsumeRoutes(app, ctx);

  // Anything else: 405 when the path exists with another method, else 404; both as JSON.
  app.all("/**", (event) => {
    const path = event.url.pathname;
    const allowed = ROUTES.filter(([re]) => re.test(path)).map(([, method]) => method);
    if (allowed.length > 0) {
      if (allowed.includes("GET") && !path.endsWith("/messages")) allowed.push("HEAD");
      return jsonError(405, "E_METHOD", `Method ${event.req.method} is not allowed on ${path}: use ${allowed.join(", ")}.`, { allow: allowed.join(", ") });
    }
    return jsonError(404, "E_ROUTE", `No route for ${event.req.method} ${path}.`);
  });

  return {
    app,
    fetch: (request) => Promise.resolve(app.fetch(request)),
    push: async (queue, messages) => {
      assertName(queue, "queue");
      return registry.push(queue, Array.isArray(messages) ? messages : [messages]);
    },
    close: () => registry.close(),
  };
}

/**
 * The HTTP API as an h3 app. Its queues stay open for the app's life: call `closeQueueApp(app)`
 * (or use `createQueueHandler`, which returns `close`) to release them.
 */
export function createQueueApp(options: QueueAppOptions = {}): H3 {
  const handler = createQueueHandler(options);
  closers.set(handler.app, handler.close);
  return handler.app;
}

/** Closes the queues of an app made by `createQueueApp`. */
export async function closeQueueApp(app: H3): Promise<void> {
  await closers.get(app)?.();
}

const closers = new WeakMap<H3, () => Promise<void>>();
