import type { ResolvedQueueAppOptions } from "./options";
import type { ApiRoute, OpenAPIOperation } from "./route";

// Pieces the routes' operations (in the route table) share.
export const errorRef = { $ref: "#/components/responses/Error" };
/** 409: with Retry-After when another process holds the queue for now (E_LOCKED). */
export const conflictRef = { $ref: "#/components/responses/Conflict" };
/** 401, with the Basic challenge (only where credentials are asked for: `operation` drops it elsewhere). */
export const unauthorizedRef = { $ref: "#/components/responses/Unauthorized" };
/** 503: retry, after Retry-After when given. */
export const unavailableRef = { $ref: "#/components/responses/Unavailable" };
/** What any route counted in may answer: 401 (where credentials are asked for), 500, and 503 (closing, busy, storage unavailable). */
export const serverErrors = { "401": unauthorizedRef, "500": errorRef, "503": unavailableRef };
/** A route on a queue: 400 for a bad name or parameter, 403 without the right on it, 404 for what is not there. */
export const errorResponses = { "400": errorRef, "403": errorRef, "404": errorRef, ...serverErrors };
/** A route that reads a body: 413 past its size limit. */
export const bodyErrors = { "413": errorRef };
/** What any route may get before it runs: the HTTP layer refuses a malformed request itself. */
const transportError = { description: "A request the HTTP layer refuses before any route runs (malformed: 400; headers too large: 431), without a JSON body" };
export const jsonContent = (schema: object) => ({ "application/json": { schema } });
const errorContent = jsonContent({
  type: "object",
  required: ["error"],
  properties: {
    error: {
      type: "object",
      required: ["code", "message"],
      properties: {
        code: { type: "string", example: "E_NAME", description: "What went wrong, for programs (E_PARAM, E_NOT_FOUND, E_LOCKED, ...)" },
        message: { type: "string", description: "What was wrong and what is allowed, for people" },
      },
    },
  },
});
/** What a consumed and a leased message both say. */
const messageFields = {
  partition: { type: "integer", description: "A partitioned queue's message: its partition (part, offset and seq are positions in it)" },
  part: { type: "integer" },
  offset: { type: "integer", description: "Byte offset of the record in its part" },
  seq: { type: "integer", description: "Sequence number in the part, from 1" },
  type: { enum: ["string", "object"] },
  data: { type: "string", description: "Text, or base64 when `encoding` is present" },
  encoding: { const: "base64" },
};
const retryAfter = { "Retry-After": { $ref: "#/components/headers/RetryAfter" } };

const name = { in: "path", required: true, schema: { type: "string", pattern: "^[A-Za-z0-9._-]{1,128}$" } } as const;
/** The path parameters a route pattern may hold (`:queue`, `:consumer`). */
const PATH_PARAMETERS: Record<string, object> = {
  queue: { ...name, name: "queue", description: "Queue name (not '.' or '..')" },
  consumer: { ...name, name: "consumer", description: "Consumer name (not '.' or '..')" },
  schedule: { ...name, name: "schedule", description: "Schedule name (the rule of queue names)" },
  asset: { in: "path", required: true, name: "asset", schema: { type: "string" }, description: "A dashboard file's name, as the page links it" },
};

/**
 * The OpenAPI 3.1 document of the API: the paths are the route table's, with the app's limits
 * filled in. `base`: the path the app is served under ("/", or a host app's mount prefix).
 */
export function openAPIDocument(options: ResolvedQueueAppOptions, routes: readonly ApiRoute[], base = "/"): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "v-queue HTTP API",
      version: options.version,
      license: { name: "MIT", identifier: "MIT" },
      description:
        "A durable file-based queue (byte-compatible with the Rust crate v_queue). Paths of the Rust v-queue-server, plus a producer API. " +
        'Errors are `{ "error": { "code", "message" } }`. With auth on, every route but /health (and /metrics when it is open) needs HTTP Basic credentials: those say `security: []`.',
    },
    // Relative to this document's origin, so it holds whatever the host's name; with the prefix the app is mounted under.
    servers: [{ url: base, description: "This server" }],
    components: {
      ...(options.auth && { securitySchemes: { basic: { type: "http", scheme: "basic" } } }),
      headers: { RetryAfter: { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 0 } } },
      responses: {
        Error: { description: "An error", content: errorContent },
        Conflict: {
          description:
            "A conflict: the request's names or cursors do not fit what the queue holds (E_CURSOR, E_KIND, E_LEASE, E_CONFLICT), or another process holds the queue for now (E_LOCKED, with Retry-After)",
          headers: retryAfter,
          content: errorContent,
        },
        Unavailable: {
          description: "E_SHUTDOWN (the server is closing), E_BUSY, E_FENCED or E_IO (storage unavailable for now): retry, after Retry-After when given",
          headers: retryAfter,
          content: errorContent,
        },
        ...(options.auth && {
          Unauthorized: {
            description: "No credentials, or wrong ones (E_AUTH)",
            headers: { "WWW-Authenticate": { description: "The Basic challenge", schema: { type: "string" } } },
            content: errorContent,
          },
        }),
      },
      schemas: {
        Position: {
          type: "object",
          required: ["part", "offset", "seq"],
          properties: { part: { type: "integer" }, offset: { type: "integer" }, seq: { type: "integer" } },
        },
        Message: {
          type: "object",
          required: ["part", "offset", "seq", "type", "data", "cursor"],
          properties: {
            ...messageFields,
            cursor: {
              type: "string",
              description: 'Commits up to and including this message ("p<partition>:<part>.<position>.<count>" on a partitioned queue)',
            },
          },
        },
        OutcomeEvent: {
          type: "object",
          required: ["cursor", "kind", "id", "at", "part", "offset", "deliveries"],
          properties: {
            cursor: { type: "string", description: "Resume after this event with it (the SSE id)" },
            kind: { type: "string", enum: ["completed", "failed", "dead", "progress"] },
            id: { type: "integer", description: "One more than the event before it in the consumer's outcome log (a partitioned queue: its partition's)" },
            at: { type: "integer", description: "When (ms since the epoch)" },
            partition: { type: "integer", description: "A partitioned queue's message: its partition" },
            part: { type: "integer" },
            offset: { type: "integer" },
            seq: { type: "integer" },
            deliveries: { type: "integer", description: "Times the message was handed out, this one included" },
            result: { description: "completed: the ack's result" },
            progress: { description: "progress: the value given" },
            error: { type: "string", description: "failed, dead: the nack's error" },
            retryAt: { type: "integer", description: "failed: when the message comes again (ms since the epoch)" },
          },
        },
        LeasedMessage: {
          type: "object",
          required: ["part", "offset", "seq", "type", "data", "lease", "deliveries", "leaseUntil"],
          properties: {
            ...messageFields,
            lease: { type: "string", description: 'The lease token "<part>.<offset>.<lease>" ("p<partition>:..." on a partitioned queue)' },
            deliveries: { type: "integer", description: "Times it was handed out, this one included" },
            leaseUntil: { type: "integer", description: "When the lease runs out (ms since the epoch, the server's clock)" },
          },
        },
      },
    },
    // No auth: `[]` says so (no credentials needed), rather than leaving it unsaid.
    security: options.auth ? [{ basic: [] }] : [],
    paths: openAPIPaths(routes, options.auth !== undefined),
  };
}

/** `/api/v1/queues/:queue` -> `/api/v1/queues/{queue}`, its parameters once per path, one operation per method. */
function openAPIPaths(routes: readonly ApiRoute[], auth: boolean): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const params = [...route.route.matchAll(/:(\w+)/g)].map(([, param]) => PATH_PARAMETERS[param!]);
    if (params.includes(undefined)) throw new Error(`[v-queue] no OpenAPI parameter for a segment of ${route.route}`);
    const path = route.route.replace(/:(\w+)/g, "{$1}");
    paths[path] ??= params.length > 0 ? { parameters: params } : {};
    paths[path][route.method.toLowerCase()] = operation(route, auth);
  }
  return paths;
}

/** A route's operation as this app answers it: its query parameters, and 401 and 403 only where credentials are asked for. */
function operation({ openapi, query = [], route }: ApiRoute, auth: boolean): OpenAPIOperation {
  const others = (openapi.parameters ?? []) as { in?: string }[];
  // The handler reads its query through `query`: one listed here only could drift from it.
  if (others.some((parameter) => parameter.in === "query"))
    throw new Error(`[v-queue] ${route}: declare query parameters in the route's query, not in openapi.parameters`);
  const parameters = [...query.map((param) => param.openapi), ...others];
  const responses: Record<string, unknown> = { ...openapi.responses, "4XX": transportError };
  if (!auth || openapi.security) {
    delete responses["401"];
    delete responses["403"];
  }
  return { ...openapi, ...(parameters.length > 0 && { parameters }), responses };
}
