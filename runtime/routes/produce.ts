import type { MessageInput } from "../../src/format/message";
import { authorize } from "../auth";
import type { DelayedProduceResponse, ProduceResponse } from "../../protocol/api";
import { checkKey } from "../../src/writer/idempotency";
import { MAX_DELAY_MS, parseAt } from "../../src/writer/produce";
import { attributeProblems, MAX_ATTRIBUTE_DELIVERIES, MAX_BACKOFF_MS, MAX_PRIORITY, type MessageAttributes } from "../../src/format/attributes";
import type { PartitionedProduceOptions } from "../../src/writer/partitioned";
import { fromBase64 } from "../../protocol/base64";
import { BATCH_CONTENT_TYPE, decodeBatch } from "../../protocol/binary";
import { utf8Strict } from "../../protocol/utf8";
import { ApiError } from "../errors";
import { errorRef, errorResponses, jsonContent, conflictRef } from "../openapi";
import { json, mediaType, nameParam, readBodyLimited } from "../request";
import { intQuery, textQuery } from "../query";
import type { ApiRoute, RouteContext } from "../route";
import { queueForm, type FormProduced } from "../queue-form";

/**
 * The producer API. The body's content type says what it holds:
 * - `application/json`: `{"message": X}` or `{"messages": [X, ...]}`; a string X is stored as
 *   text, any other JSON value as its JSON text; with `"encoding": "base64"` every X is a base64
 *   string stored as bytes.
 * - `application/vnd.v-queue.batch`: a binary batch (see protocol/binary.ts).
 * - `text/*`, `application/x-www-form-urlencoded` (curl -d) or none: one text message.
 * - anything else (`application/octet-stream`, ...): one bytes message.
 * Whatever the type: `?delayMs=` or `?at=` (also `delayMs`/`at` fields of the JSON envelope)
 * delay the messages (202), an `Idempotency-Key` header makes a retry write nothing (src/writer/produce.ts),
 * and `Message-Priority`, `Message-Max-Deliveries` and `Message-Backoff` headers (also `priority`,
 * `maxDeliveries`, `backoff` fields of the JSON envelope) give the messages attributes (src/format/attributes.ts).
 */
/** The answer of a produce whose Idempotency-Key was accepted before: the first answer again. */
const replayed = {
  "Idempotency-Replayed": {
    description: "true when this is the answer of an earlier produce with the same Idempotency-Key (nothing written)",
    schema: { const: "true" },
  },
};

/** Most UTF-8 bytes of a partition key (the engine's bound). */
const MAX_PARTITION_KEY = 1024;

const delayQuery = intQuery("delayMs", {
  min: 0,
  max: MAX_DELAY_MS,
  description: "Deliver to no consumer before this many ms from now (202). Also a `delayMs` field of the JSON envelope; not with at.",
});
const atQuery = textQuery(
  "at",
  "Deliver to no consumer before this time: ISO 8601 or ms since the epoch, at most a year ahead (202). Also an `at` field of the JSON envelope; not with delayMs.",
);
const partitionKeyQuery = textQuery("partitionKey", "As the Partition-Key header (any text); one of them.", {
  type: "string",
  minLength: 1,
  maxLength: MAX_PARTITION_KEY,
});

export function produceRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  return [
    {
      method: "POST",
      route: "/api/v1/queues/:queue/messages",
      query: [delayQuery, atQuery, partitionKeyQuery],
      openapi: {
        operationId: "produce",
        summary: "Produce one message or a batch (creates the queue); answered once as durable as the server's durability setting",
        parameters: [
          {
            name: "Idempotency-Key",
            in: "header",
            schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
            description:
              "A produce whose key this queue accepted within the server's window (5 minutes by default, across restarts) writes nothing and answers the first answer again, with `Idempotency-Replayed: true`, whatever its body. On a partitioned queue without a partition key, it also picks the partition (a retry lands where the first try did).",
          },
          {
            name: "Message-Priority",
            in: "header",
            schema: { type: "integer", minimum: 0, maximum: MAX_PRIORITY },
            description:
              "Shared consumers lease messages of a higher priority first (0 the default). Also a `priority` field of the JSON envelope; one of them.",
          },
          {
            name: "Message-Max-Deliveries",
            in: "header",
            schema: { type: "integer", minimum: 1, maximum: MAX_ATTRIBUTE_DELIVERIES },
            description:
              "Deliveries to a shared consumer before the message goes to its dead-letter queue, instead of the consumer's. Also a `maxDeliveries` field of the JSON envelope.",
          },
          {
            name: "Message-Backoff",
            in: "header",
            schema: { type: "string", pattern: "^(fixed|exponential):[0-9]+$" },
            description: `The wait before the message comes again after a failed delivery (a nack without delayMs): \`fixed:<ms>\` or \`exponential:<ms>\` (doubling), ms up to ${MAX_BACKOFF_MS}. Also a \`backoff\` field of the JSON envelope, {"type", "delayMs"}.`,
          },
          {
            name: "Message-Group",
            in: "header",
            schema: { type: "string", minLength: 1, maxLength: 255, pattern: "^[\\x20-\\x7e]+$" },
            description:
              "The messages' group: a shared consumer leases a group's messages in order, groupConcurrency (default 1) at a time; on a partitioned queue it picks the partition when no partition key does. Also a `group` field of the JSON envelope.",
          },
          {
            name: "Partition-Key",
            in: "header",
            schema: { type: "string", minLength: 1, maxLength: MAX_PARTITION_KEY },
            description:
              "A partitioned queue only: the batch goes to partition crc32(key) mod P (one key, one partition, its order kept). Also `?partitionKey=` or a `partitionKey` field of the JSON envelope; one of them.",
          },
        ],
        requestBody: {
          required: true,
          description: `At most ${limits.maxBodyBytes} bytes and ${limits.maxBatchMessages} messages.`,
          content: {
            "application/json": {
              schema: {
                description: "One of message and messages. A string is stored as text, any other JSON value as its JSON text.",
                oneOf: [
                  envelope({ message: { description: "One message" } }, "message"),
                  envelope({ messages: { type: "array", minItems: 1, maxItems: limits.maxBatchMessages, description: "A batch, in order" } }, "messages"),
                ],
              },
            },
            "text/plain": { schema: { type: "string" } },
            "application/octet-stream": { schema: { type: "string", format: "binary" } },
            [BATCH_CONTENT_TYPE]: { schema: { type: "string", format: "binary", description: "VQB1 batch framing (README)" } },
          },
        },
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "413": errorRef,
          "507": { ...errorRef, description: "The disk is full (E_IO, E_FULL): nothing acknowledged" },
          "201": {
            description: "written",
            headers: replayed,
            content: jsonContent({
              type: "object",
              required: ["queue", "count", "first", "last"],
              properties: {
                queue: { type: "string" },
                count: { type: "integer" },
                first: { $ref: "#/components/schemas/Position" },
                last: { $ref: "#/components/schemas/Position" },
                partition: { type: "integer", description: "A partitioned queue: the partition written to" },
              },
            }),
          },
          "202": {
            description: "delayed: kept aside until `delayed.until`",
            headers: replayed,
            content: jsonContent({
              type: "object",
              required: ["queue", "count", "delayed"],
              properties: {
                queue: { type: "string" },
                count: { type: "integer" },
                partition: { type: "integer" },
                delayed: {
                  type: "object",
                  required: ["until", "untilMs"],
                  properties: { until: { type: "string", format: "date-time" }, untilMs: { type: "integer" } },
                },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "write", queue);
        let count = 0;
        return ctx.tracing.traced(
          "send",
          queue,
          undefined,
          event.req.headers,
          () => count,
          async () => {
            const options = produceParams(event.url, event.req.headers);
            const body = await readBodyLimited(event.req, limits.maxBodyBytes);
            const messages = parseMessages(mediaType(event.req.headers.get("content-type")), body, limits.maxBatchMessages, options);
            if (messages.length === 0) throw new ApiError(400, "E_BODY", "No messages to push.");
            ctx.metrics?.produceBatch.observe((count = messages.length));
            const form = await queueForm(ctx.registry, queue);
            const result = await form.produce(messages, options, (why) => new ApiError(400, "E_PARAM", `${why} Declare one with PUT /api/v1/queues/{queue}.`));
            return produced(queue, result);
          },
        );
      },
    },
  ];
}

/** The JSON envelope holding `field` (`message` or `messages`, one of them: a client generated from the document cannot send neither). */
function envelope(body: Record<string, object>, field: "message" | "messages") {
  return {
    type: "object",
    required: [field],
    properties: {
      ...body,
      encoding: { const: "base64", description: "Every message is a base64 string, stored as bytes" },
      delayMs: { type: "integer", minimum: 0, maximum: MAX_DELAY_MS },
      at: { type: ["string", "integer"], description: "ISO 8601 or ms since the epoch" },
      partitionKey: { type: "string", minLength: 1, maxLength: MAX_PARTITION_KEY },
      priority: { type: "integer", minimum: 0, maximum: MAX_PRIORITY, description: "Leased first by shared consumers when higher" },
      group: { type: "string", minLength: 1, maxLength: 255, description: "Leased in order, groupConcurrency at a time" },
      maxDeliveries: { type: "integer", minimum: 1, maximum: MAX_ATTRIBUTE_DELIVERIES },
      backoff: {
        type: "object",
        required: ["type", "delayMs"],
        properties: { type: { enum: ["fixed", "exponential"] }, delayMs: { type: "integer", minimum: 0, maximum: MAX_BACKOFF_MS } },
        additionalProperties: false,
      },
    },
    additionalProperties: false,
  };
}

/** A produce's answer: 201 with where the messages went, or 202 with when delayed ones enter the queue. */
function produced(queue: string, result: FormProduced): Response {
  const headers = result.replayed ? { "idempotency-replayed": "true" } : undefined;
  const partition = result.partition === undefined ? {} : { partition: result.partition };
  if (result.until !== undefined) {
    const delayed = { until: new Date(result.until).toISOString(), untilMs: result.until };
    return json<DelayedProduceResponse>({ queue, count: result.count, ...partition, delayed }, 202, headers);
  }
  return json<ProduceResponse>({ queue, count: result.count, first: result.first!, last: result.last!, ...partition }, 201, headers);
}

/** A partition key from outside: 1 to 1024 bytes of text. */
function checkPartitionKey(key: unknown, where: string): string {
  if (typeof key !== "string" || key.length === 0 || new TextEncoder().encode(key).length > MAX_PARTITION_KEY) {
    throw new ApiError(400, "E_PARAM", `Invalid ${where} ${JSON.stringify(key)?.slice(0, 60)}: use text of 1 to ${MAX_PARTITION_KEY} bytes.`);
  }
  return key;
}

/** `Idempotency-Key`, `Partition-Key` (or `?partitionKey=`), `?delayMs=` and `?at=`, checked (400 E_PARAM saying what is allowed). */
function produceParams(url: URL, headers: Headers): PartitionedProduceOptions {
  const options: PartitionedProduceOptions = {};
  const header = headers.get("partition-key");
  const query = partitionKeyQuery.read(url);
  if (header !== null && query !== undefined) throw new ApiError(400, "E_PARAM", "Give one partition key: the Partition-Key header or ?partitionKey=.");
  if (header !== null) options.partitionKey = checkPartitionKey(header, "Partition-Key");
  else if (query !== undefined) options.partitionKey = checkPartitionKey(query, "partitionKey");
  const key = headers.get("idempotency-key");
  if (key !== null) {
    const problem = checkKey(key, "Idempotency-Key");
    if (problem) throw new ApiError(400, "E_PARAM", problem);
    options.key = key;
  }
  const delayMs = delayQuery.read(url);
  if (delayMs !== undefined) options.delayMs = delayMs;
  const at = atQuery.read(url);
  if (at !== undefined) options.at = checkAt(at);
  if (options.delayMs !== undefined && options.at !== undefined) throw new ApiError(400, "E_PARAM", "Give delayMs or at, not both.");
  return { ...options, ...attributeHeaders(headers) };
}

/** `Message-Priority`, `Message-Max-Deliveries`, `Message-Backoff` (`fixed:<ms>`, `exponential:<ms>`), `Message-Group`, checked. */
function attributeHeaders(headers: Headers): MessageAttributes {
  const given: Record<string, unknown> = {};
  const priority = headers.get("message-priority");
  if (priority !== null) given.priority = /^\d+$/.test(priority.trim()) ? Number(priority) : priority;
  const maxDeliveries = headers.get("message-max-deliveries");
  if (maxDeliveries !== null) given.maxDeliveries = /^\d+$/.test(maxDeliveries.trim()) ? Number(maxDeliveries) : maxDeliveries;
  const group = headers.get("message-group");
  if (group !== null) given.group = group;
  const backoff = headers.get("message-backoff");
  if (backoff !== null) {
    const match = /^\s*(\w+)\s*:\s*(\d+)\s*$/.exec(backoff);
    if (!match) throw new ApiError(400, "E_PARAM", `Invalid Message-Backoff ${JSON.stringify(backoff.slice(0, 60))}: use "fixed:<ms>" or "exponential:<ms>".`);
    given.backoff = { type: match[1], delayMs: Number(match[2]) };
  }
  return checkAttributes(given, "header");
}

/** Attributes from outside, checked: a 400 that says what is allowed. */
function checkAttributes(given: Record<string, unknown>, where: "header" | "body"): MessageAttributes {
  const problems = attributeProblems(given);
  if (problems.length > 0) throw new ApiError(400, where === "header" ? "E_PARAM" : "E_BODY", problems.join(" "));
  return given as MessageAttributes;
}

/** A due time as the API takes it: ISO 8601 or ms since the epoch (digits), at most a year ahead. */
function checkAt(value: unknown): number {
  if (typeof value !== "string" && typeof value !== "number")
    throw new ApiError(400, "E_PARAM", `Invalid at ${JSON.stringify(value)}: use one ISO 8601 date or ms since the epoch.`);
  try {
    return parseAt(value, "at");
  } catch (error) {
    throw new ApiError(400, "E_PARAM", (error as Error).message);
  }
}

function parseMessages(type: string, body: Uint8Array, maxMessages: number, options: PartitionedProduceOptions): MessageInput[] {
  if (type === "application/json") return parseJSONBody(body, maxMessages, options);
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

function parseJSONBody(body: Uint8Array, maxMessages: number, options: PartitionedProduceOptions): MessageInput[] {
  let parsed: unknown;
  try {
    // A BOM before the envelope is no message's: RFC 8259 lets a parser skip it.
    const text = utf8Strict.decode(body);
    parsed = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw new ApiError(400, "E_BODY", "The body is not valid JSON.");
  }
  const shape =
    'Expected {"message": ...} or {"messages": [...]} (optionally with "encoding": "base64", "delayMs" or "at", "partitionKey", "priority", "maxDeliveries", "backoff", "group").';
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ApiError(400, "E_BODY", shape);
  const { message, messages, encoding, delayMs, at, partitionKey, priority, maxDeliveries, backoff, group, ...rest } = parsed as Record<string, unknown>;
  for (const [name, value] of Object.entries({ priority, maxDeliveries, backoff, group })) {
    if (value === undefined) continue;
    if (options[name as keyof MessageAttributes] !== undefined) throw new ApiError(400, "E_PARAM", `Give ${name} once: in the body or its Message-* header.`);
    Object.assign(options, checkAttributes({ [name]: value }, "body"));
  }
  if (partitionKey !== undefined) {
    if (options.partitionKey !== undefined)
      throw new ApiError(400, "E_PARAM", "Give one partition key: in the body, the Partition-Key header or ?partitionKey=.");
    options.partitionKey = checkPartitionKey(partitionKey, "partitionKey");
  }
  if (delayMs !== undefined || at !== undefined) {
    if (options.delayMs !== undefined || options.at !== undefined || (delayMs !== undefined && at !== undefined))
      throw new ApiError(400, "E_PARAM", "Give one delay: delayMs or at, in the query or the body.");
    if (delayMs !== undefined && !(Number.isInteger(delayMs) && (delayMs as number) >= 0 && (delayMs as number) <= MAX_DELAY_MS)) {
      throw new ApiError(400, "E_PARAM", `Invalid delayMs ${JSON.stringify(delayMs)}: use an integer from 0 to ${MAX_DELAY_MS}.`);
    }
    if (delayMs !== undefined) options.delayMs = delayMs as number;
    else options.at = checkAt(at);
  }
  const extra = Object.keys(rest);
  if (extra.length > 0) throw new ApiError(400, "E_BODY", `Unknown field ${JSON.stringify(extra[0])}. ${shape}`);
  if ((message === undefined) === (messages === undefined)) throw new ApiError(400, "E_BODY", shape);
  if (encoding !== undefined && encoding !== "base64") throw new ApiError(400, "E_BODY", `Invalid encoding ${JSON.stringify(encoding)}: only "base64".`);
  let list: unknown[];
  if (messages !== undefined) {
    if (!Array.isArray(messages)) throw new ApiError(400, "E_BODY", `"messages" must be an array. ${shape}`);
    if (messages.length > maxMessages)
      throw new ApiError(413, "E_TOO_LARGE", `Too many messages in one request: ${messages.length}, the limit is ${maxMessages}.`);
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
