import { BATCH_CONTENT_TYPE } from "../protocol/binary";
import type { ResolvedQueueAppOptions } from "./options";

const name = { in: "path", required: true, schema: { type: "string", pattern: "^[A-Za-z0-9._-]{1,128}$" } } as const;
const queueParam = { ...name, name: "queue", description: "Queue name (not '.' or '..')" };
const consumerParam = { ...name, name: "consumer", description: "Consumer name (not '.' or '..')" };
const error = { $ref: "#/components/responses/Error" };
const errors = { "400": error, "401": error, "403": error, "404": error, "500": error };
const json = (schema: object) => ({ "application/json": { schema } });

/** The OpenAPI 3.1 document of the whole API, with the app's limits filled in. */
export function openAPIDocument(options: ResolvedQueueAppOptions): Record<string, unknown> {
  const { limits } = options;
  return {
    openapi: "3.1.0",
    info: {
      title: "v-queue HTTP API",
      version: options.version,
      description:
        "A durable file-based queue (byte-compatible with the Rust crate v_queue). Paths of the Rust v-queue-server, plus a producer API. " +
        "Errors are `{ \"error\": { \"code\", \"message\" } }`. With auth on, every route but /health needs HTTP Basic credentials.",
    },
    components: {
      securitySchemes: { basic: { type: "http", scheme: "basic" } },
      responses: {
        Error: {
          description: "An error",
          content: json({ type: "object", properties: { error: { type: "object", required: ["code", "message"], properties: { code: { type: "string", example: "E_NAME" }, message: { type: "string" } } } } }),
        },
      },
      schemas: {
        Position: { type: "object", properties: { part: { type: "integer" }, offset: { type: "integer" }, seq: { type: "integer" } } },
        Message: {
          type: "object",
          required: ["part", "offset", "seq", "type", "data", "cursor"],
          properties: {
            part: { type: "integer" },
            offset: { type: "integer", description: "Byte offset of the record in its part" },
            seq: { type: "integer", description: "Sequence number in the part, from 1" },
            type: { enum: ["string", "object"] },
            data: { type: "string", description: "Text, or base64 when `encoding` is present" },
            encoding: { const: "base64" },
            cursor: { type: "string", description: "Commits up to and including this message" },
          },
        },
      },
    },
    security: options.auth ? [{ basic: [] }] : [],
    paths: {
      "/health": { get: { summary: "Liveness (never behind auth)", security: [], responses: { "200": { description: "ok", content: json({ type: "object", properties: { status: { const: "ok" }, version: { type: "string" } } }) } } } },
      "/api/v1/openapi.json": { get: { summary: "This document", responses: { "200": { description: "OpenAPI 3.1" } } } },
      "/api/v1/queues": { get: { summary: "Queues in the data directory (any writer's)", responses: { ...errors, "200": { description: "names", content: json({ type: "object", properties: { queues: { type: "array", items: { type: "string" } } } }) } } } },
      "/api/v1/queues/{queue}": {
        parameters: [queueParam],
        get: {
          summary: "A queue: the Rust server's fields (current part `id`, `count_pushed` in it) plus totals",
          responses: { ...errors, "200": { description: "stats", content: json({ type: "object", properties: { name: { type: "string" }, id: { type: "integer" }, count_pushed: { type: "integer" }, is_ready: { type: "boolean" }, parts: { type: "integer" }, messages: { type: "integer" }, bytes: { type: "integer" }, consumers: { type: "integer" } } }) } },
        },
      },
      "/api/v1/queues/{queue}/messages": {
        parameters: [queueParam],
        post: {
          summary: "Produce one message or a batch (creates the queue); answered once as durable as the server's durability setting",
          requestBody: {
            required: true,
            description: `At most ${limits.maxBodyBytes} bytes and ${limits.maxBatchMessages} messages.`,
            content: {
              "application/json": { schema: { type: "object", properties: { message: {}, messages: { type: "array" }, encoding: { const: "base64" } } } },
              "text/plain": { schema: { type: "string" } },
              "application/octet-stream": { schema: { type: "string", format: "binary" } },
              [BATCH_CONTENT_TYPE]: { schema: { type: "string", format: "binary", description: "VQB1 batch framing (README)" } },
            },
          },
          responses: { ...errors, "409": error, "413": error, "201": { description: "written", content: json({ type: "object", properties: { queue: { type: "string" }, count: { type: "integer" }, first: { $ref: "#/components/schemas/Position" }, last: { $ref: "#/components/schemas/Position" } } }) } },
        },
      },
      "/api/v1/queues/{queue}/consumers": {
        parameters: [queueParam],
        get: { summary: "Consumers with their saved position and lag", responses: { ...errors, "200": { description: "consumers" } } },
      },
      "/api/v1/queues/{queue}/consumers/{consumer}": {
        parameters: [queueParam, consumerParam],
        delete: { summary: "Delete a consumer (its saved position)", responses: { ...errors, "409": error, "200": { description: "deleted" } } },
      },
      "/api/v1/queues/{queue}/consumers/{consumer}/messages": {
        parameters: [queueParam, consumerParam],
        get: {
          summary: "Long-poll consume: answers at once when messages are there, else waits up to timeout_ms for the first; creates the consumer",
          parameters: [
            { name: "max_messages", in: "query", schema: { type: "integer", minimum: 1, maximum: limits.maxMessages, default: limits.defaultMessages } },
            { name: "timeout_ms", in: "query", schema: { type: "integer", minimum: 0, maximum: limits.maxTimeoutMs, default: limits.defaultTimeoutMs } },
            { name: "commit", in: "query", description: "A cursor to commit before reading (the previous batch's): one round trip per batch", schema: { type: "string" } },
          ],
          responses: {
            ...errors,
            "409": error,
            "200": {
              description: `JSON, or with Accept: ${BATCH_CONTENT_TYPE} (or application/octet-stream) the VQB1 binary batch, cursor in x-vq-cursor`,
              content: {
                ...json({ type: "object", properties: { queue: { type: "string" }, consumer: { type: "string" }, count: { type: "integer" }, cursor: { type: ["string", "null"] }, messages: { type: "array", items: { $ref: "#/components/schemas/Message" } } } }),
                [BATCH_CONTENT_TYPE]: { schema: { type: "string", format: "binary" } },
              },
            },
          },
        },
      },
      "/api/v1/queues/{queue}/consumers/{consumer}/commit": {
        parameters: [queueParam, consumerParam],
        post: {
          summary: "Commit: no body commits everything handed out; a cursor commits up to its message. Idempotent.",
          parameters: [{ name: "cursor", in: "query", schema: { type: "string" } }],
          requestBody: { required: false, content: { ...json({ type: "object", properties: { cursor: { type: "string" } } }), "text/plain": { schema: { type: "string" } } } },
          responses: { ...errors, "409": error, "200": { description: "committed", content: json({ type: "object", properties: { committed: { type: "string" } } }) } },
        },
      },
      "/api/v1/queues/{queue}/consumers/{consumer}/rewind": {
        parameters: [queueParam, consumerParam],
        post: {
          summary: "Hand out again everything after the saved position (messages handed out and not committed come again)",
          responses: { ...errors, "409": error, "200": { description: "rewound", content: json({ type: "object", properties: { cursor: { type: "string" } } }) } },
        },
      },
    },
  };
}
