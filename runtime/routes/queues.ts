// Over 300 lines: the queue routes (list, stats, declare, purge, delete, prune), each mostly its
// OpenAPI description beside its handler.
import type { H3Event } from "h3";
import { formatCursor } from "../../protocol/cursor";
import { inspectQueue, listQueues } from "../../src/inspect/queues";
import { authorize, can, type Principal } from "../auth";
import { ApiError } from "../errors";
import { bodyErrors, errorResponses, jsonContent, conflictRef, serverErrors } from "../openapi";
import { consumerParams, json, nameParam, readBodyLimited } from "../request";
import { MAX_PARTITIONS } from "../../src/partitions/declaration";
import { utf8 } from "../../protocol/utf8";
import type { ApiRoute, RouteContext } from "../route";
import type {
  ConsumerInfo,
  ConsumerListResponse,
  DeclareQueueRequest,
  DeclareQueueResponse,
  DeleteConsumerResponse,
  DeleteQueueResponse,
  PurgeResponse,
  QueueInfoResponse,
  QueueListResponse,
} from "../../protocol/api";

/** Listing and inspecting queues and consumers; purging and deleting them (the admin right). */
export function queueRoutes(ctx: RouteContext): ApiRoute[] {
  return [
    {
      method: "GET",
      route: "/api/v1/queues",
      openapi: {
        operationId: "listQueues",
        summary: "Queues in the data directory (any writer's) that the user may read or write",
        responses: {
          ...serverErrors,
          "200": {
            description: "names",
            content: jsonContent({ type: "object", required: ["queues"], properties: { queues: { type: "array", items: { type: "string" } } } }),
          },
        },
      },
      handler: async (_event, principal) => {
        const names = await listQueues(await ctx.registry.driver());
        return json<QueueListResponse>({ queues: names.filter((q) => can(principal, "read", q) || can(principal, "write", q)) });
      },
    },
    {
      method: "GET",
      route: "/api/v1/queues/:queue",
      openapi: {
        operationId: "getQueue",
        summary: "A queue: the Rust server's fields (current part `id`, `count_pushed` in it) plus totals",
        responses: {
          ...errorResponses,
          "200": {
            description: "stats",
            content: jsonContent({
              type: "object",
              required: ["name", "id", "count_pushed", "is_ready", "parts", "messages", "bytes", "consumers"],
              properties: {
                name: { type: "string" },
                id: { type: "integer", description: "The current part" },
                count_pushed: { type: "integer", description: "Records in the current part" },
                is_ready: { type: "boolean" },
                parts: { type: "integer" },
                messages: { type: "integer" },
                bytes: { type: "integer" },
                consumers: { type: "integer" },
                partitions: { type: "integer", description: "A partitioned queue: how many partitions" },
                partitionQueues: {
                  type: "array",
                  description: "A partitioned queue: each partition's queue",
                  items: {
                    type: "object",
                    required: ["name", "partition", "id", "parts", "messages", "bytes"],
                    properties: {
                      name: { type: "string" },
                      partition: { type: "integer" },
                      id: { type: "integer" },
                      parts: { type: "integer" },
                      messages: { type: "integer" },
                      bytes: { type: "integer" },
                    },
                  },
                },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const { stats } = await readableStats(ctx, event, principal);
        return json<QueueInfoResponse>({
          // The Rust server's fields: the current part and the records in it.
          name: stats.name,
          id: stats.currentPart,
          count_pushed: stats.currentCount,
          is_ready: true,
          // Totals over every part (of every partition: a partitioned queue has none of its own).
          parts: stats.partitionQueues ? stats.partitionQueues.reduce((sum, p) => sum + p.parts.length, 0) : stats.parts.length,
          messages: stats.messages,
          bytes: stats.bytes,
          consumers: stats.consumers.length,
          ...(stats.partitionQueues && {
            partitions: stats.partitions,
            partitionQueues: stats.partitionQueues.map((p) => ({
              name: p.name,
              partition: Number(p.name.slice(p.name.lastIndexOf(".p") + 2)),
              id: p.currentPart,
              parts: p.parts.length,
              messages: p.messages,
              bytes: p.bytes,
            })),
          }),
        });
      },
    },
    {
      method: "GET",
      route: "/api/v1/queues/:queue/consumers",
      openapi: {
        operationId: "listConsumers",
        summary:
          "Consumers with their saved position (a shared consumer's ack floor) and lag, their kind, and live stats of the shared consumers this server holds",
        responses: { ...errorResponses, "200": { description: "consumers", content: consumersContent } },
      },
      handler: async (event, principal) => {
        const { queue, stats } = await readableStats(ctx, event, principal);
        const live = ctx.registry.sharedStats(queue);
        const consumers = stats.consumers.map((c): ConsumerInfo => {
          const info: ConsumerInfo = {
            name: c.name,
            part: c.part,
            position: c.position,
            count_popped: c.count,
            lag: c.lag,
            cursor: formatCursor(c),
            kind: c.kind,
          };
          const held = live.get(c.name);
          if (!held) return info;
          const oldest = held.oldestUnacked;
          return {
            ...info,
            inFlight: held.inFlight,
            redelivered: held.redelivered,
            deadLettered: held.deadLettered,
            oldestUnacked: oldest && { part: oldest.part, offset: oldest.offset, seq: oldest.seq },
            ...(held.limitedUntil !== undefined && { limitedUntil: held.limitedUntil }),
          };
        });
        return json<ConsumerListResponse>({ queue, consumers });
      },
    },
    {
      method: "PUT",
      route: "/api/v1/queues/:queue",
      openapi: {
        operationId: "declareQueue",
        summary:
          'Declare a partitioned queue (README, "Partitioned queues"); needs the admin right. 409 when it is declared with another count or exists as an ordinary queue',
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            required: ["partitions"],
            properties: { partitions: { type: "integer", minimum: 1, maximum: MAX_PARTITIONS } },
          }),
        },
        responses: {
          ...errorResponses,
          ...bodyErrors,
          "409": conflictRef,
          "200": { description: "already declared so", content: declaredContent },
          "201": { description: "declared", content: declaredContent },
        },
      },
      handler: async (event, principal) => {
        const queue = adminQueue(event, principal);
        const { partitions } = await declareBody(event.req);
        const created = await ctx.registry.partitions.declare(queue, partitions);
        return json<DeclareQueueResponse>({ queue, partitions, created }, created ? 201 : 200);
      },
    },
    {
      method: "DELETE",
      route: "/api/v1/queues/:queue",
      openapi: {
        operationId: "deleteQueue",
        summary: "Delete a queue: its messages, consumers and files; needs the admin right. 409 while a writer or consumer of it is open in another process",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: "deleted",
            content: jsonContent({
              type: "object",
              required: ["queue", "deleted", "parts", "consumers"],
              properties: {
                queue: { type: "string" },
                deleted: { const: true },
                parts: { type: "integer" },
                consumers: { type: "array", items: { type: "string" } },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = adminQueue(event, principal);
        const { parts, consumers } = await ctx.registry.deleteQueue(queue);
        ctx.monitor.forget(queue);
        return json<DeleteQueueResponse>({ queue, deleted: true, parts, consumers });
      },
    },
    {
      method: "POST",
      route: "/api/v1/queues/:queue/purge",
      openapi: {
        operationId: "purgeQueue",
        summary:
          "Remove every message; the queue and its consumers stay, at the new start; needs the admin right. 409 while a writer or consumer of it is open in another process. A partitioned queue: each partition in turn (a 409 leaves the ones before it purged: call it again)",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: "purged",
            content: jsonContent({
              type: "object",
              required: ["queue", "messages", "bytes", "parts", "part"],
              properties: {
                queue: { type: "string" },
                messages: { type: "integer" },
                bytes: { type: "integer" },
                parts: { type: "integer" },
                part: { type: "integer" },
                partitions: { type: "integer" },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = adminQueue(event, principal);
        const { messages, bytes, parts, part, partitions } = await ctx.registry.purgeQueue(queue);
        return json<PurgeResponse>({ queue, messages, bytes, parts, part, ...(partitions === undefined ? {} : { partitions }) });
      },
    },
    {
      method: "DELETE",
      route: "/api/v1/queues/:queue/consumers/:consumer",
      openapi: {
        operationId: "deleteConsumer",
        summary: "Delete a consumer (its saved position); needs the admin right",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: "deleted",
            content: jsonContent({
              type: "object",
              required: ["queue", "consumer", "deleted"],
              properties: { queue: { type: "string" }, consumer: { type: "string" }, deleted: { const: true } },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal, "admin");
        await ctx.registry.deleteConsumer(queue, consumer);
        return json<DeleteConsumerResponse>({ queue, consumer, deleted: true });
      },
    },
  ];
}

const consumersContent = jsonContent({
  type: "object",
  required: ["queue", "consumers"],
  properties: {
    queue: { type: "string" },
    consumers: {
      type: "array",
      items: {
        type: "object",
        required: ["name", "part", "position", "count_popped", "lag", "cursor", "kind"],
        properties: {
          name: { type: "string" },
          part: { type: "integer" },
          position: { type: "integer", description: "Byte position in part of the next message" },
          count_popped: { type: "integer", description: "Messages read (committed) in part" },
          lag: { type: "integer", description: "Messages pushed and not yet committed" },
          cursor: { type: "string", description: "The committed position as a cursor" },
          kind: { enum: ["ordered", "shared"] },
          inFlight: { type: "integer", description: "A shared consumer this server holds: leases running now" },
          redelivered: { type: "integer" },
          deadLettered: { type: "integer" },
          oldestUnacked: { oneOf: [{ $ref: "#/components/schemas/Position" }, { type: "null" }] },
          limitedUntil: {
            type: "integer",
            description: "A shared consumer this server holds, handing nothing out (backing off, or its rate limit's window spent): until when (ms)",
          },
        },
      },
    },
  },
});

const declaredContent = jsonContent({
  type: "object",
  required: ["queue", "partitions", "created"],
  properties: { queue: { type: "string" }, partitions: { type: "integer" }, created: { type: "boolean" } },
});

/** The body of a declaration: `{"partitions": P}`, checked. */
async function declareBody(request: Request): Promise<DeclareQueueRequest> {
  const shape = `Expected {"partitions": P} with P from 1 to ${MAX_PARTITIONS}.`;
  let body: unknown;
  try {
    body = JSON.parse(utf8.decode(await readBodyLimited(request, 4096)));
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new ApiError(400, "E_BODY", `The body is not valid JSON. ${shape}`);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new ApiError(400, "E_BODY", shape);
  const { partitions, ...rest } = body as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw new ApiError(400, "E_BODY", `Unknown field ${JSON.stringify(extra[0])}. ${shape}`);
  if (typeof partitions !== "number" || !Number.isInteger(partitions) || partitions < 1 || partitions > MAX_PARTITIONS) {
    throw new ApiError(400, "E_BODY", `Invalid partitions ${JSON.stringify(partitions) ?? "(none)"}: use a whole number from 1 to ${MAX_PARTITIONS}.`);
  }
  return { partitions };
}

function notFound(queue: string): ApiError {
  return new ApiError(404, "E_NOT_FOUND", `Queue "${queue}" does not exist.`);
}

/** `{queue}` of the path, checked, once `principal` has the admin right on it. */
function adminQueue(event: H3Event, principal: Principal | undefined): string {
  const queue = nameParam(event, "queue");
  authorize(principal, "admin", queue);
  return queue;
}

/** `{queue}` of the path, checked, read rights checked, and its stats (404 when there is no such queue). */
async function readableStats(ctx: RouteContext, event: H3Event, principal: Principal | undefined) {
  const queue = nameParam(event, "queue");
  authorize(principal, "read", queue);
  const stats = await inspectQueue(await ctx.registry.driver(), queue);
  if (!stats) throw notFound(queue);
  return { queue, stats };
}
