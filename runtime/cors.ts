import type { H3Event, Middleware } from "h3";

/**
 * CORS (Fetch standard), so that pages on other origins can use the API with the client SDK.
 * Off unless configured: a queue server usually has no browser clients.
 */
export interface CorsOptions {
  /** Origins allowed: `"*"` for any (never with credentials), a list, or a predicate. */
  origin: "*" | string[] | ((origin: string) => boolean);
  /** Seconds a browser may cache a preflight. @default 600 */
  maxAge?: number;
}

const METHODS = "GET, HEAD, POST, DELETE, OPTIONS";
const ALLOWED_HEADERS = "authorization, content-type, accept";
// The binary consume response carries its cursor and count in headers.
const EXPOSED_HEADERS = "x-vq-cursor, x-vq-count";

export function corsMiddleware(options: CorsOptions): Middleware {
  const maxAge = String(options.maxAge ?? 600);
  const allowed = (origin: string) =>
    options.origin === "*" ? true : typeof options.origin === "function" ? options.origin(origin) : options.origin.includes(origin);

  return async (event: H3Event, next) => {
    const origin = event.req.headers.get("origin");
    // Not a cross-origin call we serve: no CORS headers, so the browser refuses it.
    if (!origin || !allowed(origin)) return next();
    const cors: Record<string, string> = {
      // A specific origin, not "*", whenever we can: Basic auth (an Authorization header) needs it.
      "access-control-allow-origin": options.origin === "*" ? "*" : origin,
      "access-control-expose-headers": EXPOSED_HEADERS,
      vary: "origin",
    };
    if (event.req.method === "OPTIONS" && event.req.headers.has("access-control-request-method")) {
      return new Response(null, {
        status: 204,
        headers: { ...cors, "access-control-allow-methods": METHODS, "access-control-allow-headers": ALLOWED_HEADERS, "access-control-max-age": maxAge },
      });
    }
    const response = await next();
    // On every answer, errors included (h3 does not merge staged headers into a 4xx Response).
    if (!(response instanceof Response)) {
      for (const [name, value] of Object.entries(cors)) event.res.headers.set(name, value);
      return response;
    }
    const headers = new Headers(response.headers);
    for (const [name, value] of Object.entries(cors)) headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  };
}

/** Checks the option and says what is allowed. */
export function resolveCors(cors: CorsOptions | false | undefined): CorsOptions | undefined {
  if (!cors) return undefined;
  const { origin } = cors;
  const ok = origin === "*" || typeof origin === "function" || (Array.isArray(origin) && origin.every((o) => typeof o === "string" && /^https?:\/\/[^/]+$/.test(o)));
  if (!ok) throw new TypeError('[v-queue] [http] Invalid `cors.origin`: use "*", a list of origins like "https://app.example.com" (scheme and host, no path), or a function.');
  return cors;
}
