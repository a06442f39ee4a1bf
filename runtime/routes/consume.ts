import { FastResponse } from "srvx";
import type { CommitResponse, RewindResponse, SeekResponse } from "../../protocol/api";
import { BATCH_CONTENT_TYPE } from "../../protocol/binary";
import { utf8 } from "../../protocol/utf8";
import { encodeConsumeJSON } from "../consume-json";
import { queueForm, type QueueForm } from "../queue-form";
import { ApiError, JSON_TYPE } from "../errors";
import { bodyErrors, errorResponses, jsonContent, conflictRef } from "../openapi";
import { consumerParams, json, mediaType, readBodyLimited } from "../request";
import { intQuery, textQuery } from "../query";
import type { ApiRoute, RouteContext } from "../route";

const COMMIT_BODY_LIMIT = 4096;

/** Long-poll consume, commit and rewind. */
export function consumeRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  const maxMessages = intQuery("max_messages", {
    min: 1,
    max: limits.maxMessages,
    fallback: limits.defaultMessages,
    description: "Most messages in the answer (fewer when they pass the server's response size limit)",
  });
  const timeoutMs = intQuery("timeout_ms", {
    min: 0,
    max: limits.maxTimeoutMs,
    fallback: limits.defaultTimeoutMs,
    description: "How long to wait for a first message when none is there (0: answer at once, maybe empty)",
  });
  const commitQuery = textQuery("commit", "A cursor to commit before reading (the previous batch's): one round trip per batch");
  const cursorQuery = textQuery("cursor", "Commit up to and including this cursor's message (or give it in the body; none commits everything handed out)");
  return [
    {
      method: "GET",
      route: "/api/v1/queues/:queue/consumers/:consumer/messages",
      // A HEAD would hand messages out and drop them: only GET consumes.
      noHead: true,
      query: [maxMessages, timeoutMs, commitQuery],
      openapi: {
        operationId: "consume",
        summary: "Long-poll consume: answers at once when messages are there, else waits up to timeout_ms for the first; creates the consumer",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: `JSON, or with Accept: ${BATCH_CONTENT_TYPE} (or application/octet-stream) the VQB1 binary batch, cursor in x-vq-cursor, missed in x-vq-missed`,
            headers: {
              "X-VQ-Count": { description: "A binary answer: how many messages it holds", schema: { type: "integer" } },
              "X-VQ-Cursor": { description: "A binary answer with messages: the cursor of its last one (commits the batch)", schema: { type: "string" } },
              "X-VQ-Missed": {
                description: "A binary answer: how many messages retention deleted before this consumer read them, since its previous consume",
                schema: { type: "integer" },
              },
            },
            content: {
              ...jsonContent({
                type: "object",
                required: ["queue", "consumer", "count", "cursor", "messages"],
                properties: {
                  queue: { type: "string" },
                  consumer: { type: "string" },
                  count: { type: "integer" },
                  cursor: { type: ["string", "null"] },
                  missed: {
                    type: "integer",
                    description: "Present when retention deleted messages this consumer had not read: how many, since its previous consume",
                  },
                  messages: { type: "array", items: { $ref: "#/components/schemas/Message" } },
                },
              }),
              [BATCH_CONTENT_TYPE]: { schema: { type: "string", format: "binary", description: "VQB1 (VQP1 on a partitioned queue)" } },
              "application/octet-stream": { schema: { type: "string", format: "binary", description: "The same batch, for Accept: application/octet-stream" } },
            },
          },
        },
      },
      handler: async (event, principal) => {
        // h3 routes no HEAD here; a host that did would lose the messages handed out.
        if (event.req.method !== "GET") throw new ApiError(405, "E_METHOD", "Consume with GET.", { allow: "GET" });
        const { queue, consumer } = consumerParams(event, principal);
        const max = maxMessages.read(event.url);
        const timeout = timeoutMs.read(event.url);
        const binaryType = acceptsBinary(event.req.headers.get("accept"));
        // Optional: commit the previous batch in the same round trip.
        const form = await queueForm(ctx.registry, queue);
        const param = commitQuery.read(event.url);
        const commit = param === undefined ? undefined : form.cursor(param, "commit");
        const polled = timeout > 0 ? ctx.metrics?.longPoll() : undefined;
        const { slot, messages } = await ctx.tracing
          .traced(
            "receive",
            queue,
            consumer,
            event.req.headers,
            (got) => got.messages.length,
            async () => {
              // First: held by another instance, the consumer comes here only once that commit is taken (QueueForm.commit).
              if (commit !== undefined) await form.commit(consumer, commit);
              const slot = await form.ordered(consumer);
              // Text stays in its UTF-8 bytes: both answers write it out without decoding it.
              return { slot, messages: await slot.poll({ max, maxBytes: limits.maxResponseBytes, timeoutMs: timeout, signal: event.req.signal, raw: true }) };
            },
          )
          .finally(() => polled?.());
        const cursor = form.batchCursor(messages);
        // Retention deleted messages this consumer had not read: told, never silent.
        const missed = slot.consumer.takeMissed();
        // Binary: VQB1, or on a partitioned queue VQP1 (the batch framing with each record's partition).
        if (binaryType) return binaryAnswer(binaryType, form.encodeBatch(messages), messages.length, cursor, missed);
        return new FastResponse(encodeConsumeJSON(queue, consumer, messages, cursor, missed), { headers: { "content-type": JSON_TYPE } });
      },
    },
    {
      method: "POST",
      route: "/api/v1/queues/:queue/consumers/:consumer/commit",
      query: [cursorQuery],
      openapi: {
        operationId: "commit",
        summary: "Commit: no body commits everything handed out; a cursor commits up to its message. Idempotent.",
        requestBody: {
          required: false,
          content: { ...jsonContent({ type: "object", properties: { cursor: { type: "string" } } }), "text/plain": { schema: { type: "string" } } },
        },
        responses: {
          ...errorResponses,
          ...bodyErrors,
          "409": conflictRef,
          "200": { description: "committed", content: positionAnswer("committed", "The cursor committed up to") },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const form = await queueForm(ctx.registry, queue);
        const cursor = await commitCursor(event.req, cursorQuery.read(event.url), form);
        const committed = await form.commit(consumer, cursor);
        return json<CommitResponse>({ queue, consumer, committed });
      },
    },
    {
      method: "POST",
      route: "/api/v1/queues/:queue/consumers/:consumer/rewind",
      openapi: {
        operationId: "rewind",
        summary: "Hand out again everything after the saved position (messages handed out and not committed come again)",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": { description: "rewound", content: positionAnswer("cursor", "Where the consumer reads from now") },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        // A partitioned queue: the partitions this server holds; others rewind where they are held.
        const slot = await (await queueForm(ctx.registry, queue)).ordered(consumer, false);
        return json<RewindResponse>({ queue, consumer, cursor: await slot.rewind() });
      },
    },
    {
      method: "POST",
      route: "/api/v1/queues/:queue/consumers/:consumer/seek",
      openapi: {
        operationId: "seek",
        summary:
          "Move the consumer, and save it there: to the oldest message, the end, a cursor, a message by part and sequence (it comes next), or a time (every message from then on, and up to indexInterval before); creates the consumer. On a partitioned queue: every partition (earliest, latest, a time) or those a composite cursor names, each taken by this instance first",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["to"],
            properties: {
              to: {
                oneOf: [
                  { type: "string", description: '"earliest", "latest" or a cursor' },
                  { type: "object", properties: { part: { type: "integer" }, seq: { type: "integer" } } },
                  {
                    type: "object",
                    properties: {
                      time: {
                        oneOf: [
                          { type: "string", format: "date-time" },
                          { type: "integer", description: "ms since the epoch" },
                        ],
                      },
                    },
                  },
                ],
              },
            },
          }),
        },
        responses: {
          ...errorResponses,
          ...bodyErrors,
          "409": conflictRef,
          "200": { description: "moved", content: positionAnswer("cursor", "Where the consumer reads from now") },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const form = await queueForm(ctx.registry, queue);
        const to = form.seekTarget(await seekBody(event.req));
        // A partitioned queue: each partition is taken by this instance (asked of its holder), then moved.
        return json<SeekResponse>({ queue, consumer, cursor: await (await form.ordered(consumer)).seek(to) });
      },
    },
  ];
}

/** A commit's, rewind's or seek's answer: the queue, the consumer, and `field`, a cursor. */
function positionAnswer(field: string, description: string) {
  return jsonContent({
    type: "object",
    required: ["queue", "consumer", field],
    properties: { queue: { type: "string" }, consumer: { type: "string" }, [field]: { type: "string", description } },
  });
}

/** The `to` of a seek body, unchecked (the queue's form checks it). */
async function seekBody(request: Request): Promise<unknown> {
  const body = await readBodyLimited(request, COMMIT_BODY_LIMIT);
  try {
    return (JSON.parse(utf8.decode(body)) as { to?: unknown })?.to;
  } catch {
    throw new ApiError(400, "E_BODY", 'The seek body is not valid JSON: send {"to": "earliest"}, "latest", a cursor, or {"part": 0, "seq": 1}.');
  }
}

/** The binary media type the client asked for, if any. */
function acceptsBinary(accept: string | null): string | undefined {
  if (!accept) return undefined;
  for (const part of accept.split(",")) {
    const type = mediaType(part);
    if (type === BATCH_CONTENT_TYPE || type === "application/octet-stream") return type;
  }
  return undefined;
}

/** The cursor to commit up to: `?cursor=` (`query`), a JSON `{ "cursor" }` body or a text body; none commits all handed out. */
async function commitCursor(request: Request, query: string | undefined, form: QueueForm): Promise<string | undefined> {
  let cursor: unknown = query;
  const body = await readBodyLimited(request, COMMIT_BODY_LIMIT);
  const text = utf8.decode(body).trim();
  if (text.length > 0) {
    if (cursor !== undefined) throw new ApiError(400, "E_PARAM", "Give the cursor either in the query or in the body, not both.");
    if (mediaType(request.headers.get("content-type")) === "application/json" || text.startsWith("{")) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new ApiError(400, "E_BODY", "The commit body is not valid JSON.");
      }
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new ApiError(400, "E_BODY", 'The commit body must be a JSON object: {"cursor": "<part>.<position>.<count>"} (or empty).');
      }
      cursor = (parsed as { cursor?: unknown }).cursor;
    } else cursor = text;
  }
  if (cursor === undefined || cursor === null) return undefined;
  return form.cursor(cursor, "cursor");
}

/** A binary consume answer: the batch, its count, cursor and missed messages in headers. */
function binaryAnswer(type: string, body: Uint8Array<ArrayBuffer>, count: number, cursor: string | undefined, missed: number): Response {
  const headers: Record<string, string> = { "content-type": type, "x-vq-count": String(count) };
  if (cursor) headers["x-vq-cursor"] = cursor;
  if (missed > 0) headers["x-vq-missed"] = String(missed);
  return new FastResponse(body, { headers });
}
