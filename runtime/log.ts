import { getRequestIP, type H3Event, type Middleware } from "h3";
import { basicCredentials } from "./auth";
import type { QueueAppLogger } from "./types";

/**
 * Logs requests, one line each, with what an operator needs and nothing secret (no body, no
 * query, no password):
 * `POST /api/v1/queues/orders/messages 201 2.4 ms user=billing ip=127.0.0.1`.
 * - `warn`: refused credentials (401) and rights (403): who tried, from where;
 * - `info`: requests that change state: produce, commit (a POST, or a consume with `commit=`),
 *   rewind, delete a consumer;
 * - `debug`: every other request (consumes, listings, health).
 */
export function requestLogMiddleware(logger: QueueAppLogger): Middleware {
  return async (event, next) => {
    const start = performance.now();
    let status = 500;
    try {
      const response = await next();
      status = (response as { status?: unknown } | undefined)?.status as number;
      if (typeof status !== "number") status = event.res.status ?? 200;
      return response;
    } finally {
      const line = `${event.req.method} ${event.url.pathname} ${status} ${(performance.now() - start).toFixed(1)} ms user=${basicUsername(event) ?? "-"} ip=${getRequestIP(event) ?? "-"}`;
      if (status === 401) logger.warn(`[v-queue] auth failed: ${line}`);
      else if (status === 403) logger.warn(`[v-queue] forbidden: ${line}`);
      else if (changesState(event)) logger.info?.(`[v-queue] ${line}`);
      else logger.debug?.(`[v-queue] ${line}`);
    }
  };
}

function changesState(event: H3Event): boolean {
  const method = event.req.method;
  if (method === "POST" || method === "PUT" || method === "DELETE") return true;
  return method === "GET" && event.url.pathname.endsWith("/messages") && event.url.searchParams.has("commit");
}

/** The user name of Basic credentials, quoted (the password part is dropped). */
function basicUsername(event: H3Event): string | undefined {
  // Lenient: a name the login refuses is still shown as sent.
  const credentials = basicCredentials(event.req.headers.get("authorization"), lenient);
  // Printable and short: a log line is not a place for whatever a client sends.
  return typeof credentials === "object" ? JSON.stringify(credentials.user.slice(0, 64)) : undefined;
}

const lenient = new TextDecoder();
