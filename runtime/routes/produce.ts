import type { MessageInput } from "../../src/message";
import { authorize } from "../auth";
import type { ProduceResponse } from "../../protocol/api";
import { fromBase64 } from "../../protocol/base64";
import { BATCH_CONTENT_TYPE, decodeBatch } from "../../protocol/binary";
import { utf8Strict } from "../../protocol/utf8";
import { ApiError } from "../errors";
import { errorRef, errorResponses, jsonContent } from "../openapi";
import { json, mediaType, nameParam, readBodyLimited } from "../request";
import type { ApiRoute, RouteContext } from "../route";

/**
 * The producer API. The body's content type says what it holds:
 * - `application/json`: `{"message": X}` or `{"messages": [X, ...]}`; a string X is stored as
 *   text, any other JSON value as its JSON text; with `"encoding": "base64"` every X is a base64
 *   string stored as bytes.
 * - `application/vnd.v-queue.batch`: a binary batch (see protocol/binary.ts).
 * - `text/*`, `application/x-www-form-urlencoded` (curl -d) or none: one text message.
 * - anything else (`application/octet-stream`, ...): one bytes message.
 */
export function produceRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  return [
    {
      method: "POST",
      route: "/api/v1/queues/:queue/messages",
      openapi: {
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
        responses: {
          ...errorResponses,
          "409": errorRef,
          "413": errorRef,
          "201": { description: "written", content: jsonContent({ type: "object", properties: { queue: { type: "string" }, count: { type: "integer" }, first: { $ref: "#/components/schemas/Position" }, last: { $ref: "#/components/schemas/Position" } } }) },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "write", queue);
        const body = await readBodyLimited(event.req, limits.maxBodyBytes);
        const messages = parseMessages(mediaType(event.req.headers.get("content-type")), body, limits.maxBatchMessages);
        if (messages.length === 0) throw new ApiError(400, "E_BODY", "No messages to push.");
        const positions = await ctx.registry.push(queue, messages);
        return json<ProduceResponse>({ queue, count: positions.length, first: positions[0]!, last: positions.at(-1)! }, 201);
      },
    },
  ];
}

function parseMessages(type: string, body: Uint8Array, maxMessages: number): MessageInput[] {
  if (type === "application/json") return parseJSONBody(body, maxMessages);
  // A framing error is a ProtocolError: errorResponse makes it a 400 (413 for too many).
  if (type === BATCH_CONTENT_TYPE) return decodeBatch(body, maxMessages).map((r) => r.data);
  if (type === "" || type.startsWith("text/") || type === "application/x-www-form-urlencoded") {
    try {
      return [utf8Strict.decode(body)];
    } catch {
      throw new ApiError(400, "E_BODY", "A text body must be valid UTF-8 (send bytes as application/octet-stream).");
    }
  }
  return [body];
}

function parseJSONBody(body: Uint8Array, maxMessages: number): MessageInput[] {
  let parsed: unknown;
  try {
    // A BOM before the envelope is no message's: RFC 8259 lets a parser skip it.
    const text = utf8Strict.decode(body);
    parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw new ApiError(400, "E_BODY", "The body is not valid JSON.");
  }
  const shape = 'Expected {"message": ...} or {"messages": [...]} (optionally with "encoding": "base64").';
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ApiError(400, "E_BODY", shape);
  const { message, messages, encoding, ...rest } = parsed as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw new ApiError(400, "E_BODY", `Unknown field ${JSON.stringify(extra[0])}. ${shape}`);
  if ((message === undefined) === (messages === undefined)) throw new ApiError(400, "E_BODY", shape);
  if (encoding !== undefined && encoding !== "base64") throw new ApiError(400, "E_BODY", `Invalid encoding ${JSON.stringify(encoding)}: only "base64".`);
  let list: unknown[];
  if (messages !== undefined) {
    if (!Array.isArray(messages)) throw new ApiError(400, "E_BODY", `"messages" must be an array. ${shape}`);
    if (messages.length > maxMessages) throw new ApiError(413, "E_TOO_LARGE", `Too many messages in one request: ${messages.length}, the limit is ${maxMessages}.`);
    list = messages;
  } else list = [message];
  // JSON values only (JSON.parse makes nothing else): strings as text, the rest as their JSON text.
  if (encoding !== "base64") return list as MessageInput[];
  return list.map((item, i) => {
    const bytes = typeof item === "string" ? fromBase64(item) : undefined;
    if (!bytes) throw new ApiError(400, "E_BODY", `Message ${i} is not a base64 string.`);
    return bytes;
  });
}
