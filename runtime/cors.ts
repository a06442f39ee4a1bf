import { optionError } from "../src/core/check";
import { handleCors, type H3Event, type Middleware } from "h3";

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

const METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS"];
// last-event-id: the client's event stream resumes with it (as an EventSource does); message-*: a
// raw-body produce's attributes (routes/produce.ts).
const ALLOWED_HEADERS = [
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
];
// The binary consume response carries its cursor, count and missed messages in headers; a replayed produce says so in one.
const EXPOSED_HEADERS = ["x-vq-cursor", "x-vq-count", "x-vq-missed", "idempotency-replayed", "retry-after"];

export function corsMiddleware(options: CorsOptions): Middleware {
  const maxAge = String(options.maxAge ?? 600);
  const allowed = (origin: string) =>
    options.origin === "*" ? true : typeof options.origin === "function" ? options.origin(origin) : options.origin.includes(origin);

  return (event: H3Event, next) => {
    const origin = event.req.headers.get("origin");
    // Not a cross-origin call we serve: no CORS headers, so the browser refuses it (h3's
    // handleCors would still answer its preflight, and send `vary` to any caller).
    if (!origin || !allowed(origin)) return next();
    // h3 stages the headers for every answer, errors included, and answers a preflight (204).
    // A specific origin, not "*", whenever we can: Basic auth (an Authorization header) needs it.
    const preflight = handleCors(event, {
      origin: options.origin === "*" ? "*" : [origin],
      methods: METHODS,
      allowHeaders: ALLOWED_HEADERS,
      exposeHeaders: EXPOSED_HEADERS,
      maxAge,
    });
    // With "*" too the answer depends on the Origin header (none: no CORS headers); h3 leaves `vary` out then.
    if (options.origin === "*") for (const headers of [event.res.headers, event.res.errHeaders]) headers.append("vary", "origin");
    return preflight || next();
  };
}

/** Checks the option and says what is allowed. */
export function resolveCors(cors: CorsOptions | false | undefined): CorsOptions | undefined {
  if (!cors) return undefined;
  const { origin } = cors;
  const ok =
    origin === "*" || typeof origin === "function" || (Array.isArray(origin) && origin.every((o) => typeof o === "string" && /^https?:\/\/[^/]+$/.test(o)));
  if (!ok) throw optionError('Invalid `cors.origin`: use "*", a list of origins like "https://app.example.com" (scheme and host, no path), or a function.');
  return cors;
}
