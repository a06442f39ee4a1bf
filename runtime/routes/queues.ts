import type { H3 } from "h3";
import { formatCursor } from "../../protocol/cursor";
import { inspectQueue, listQueues } from "../../src/inspect";
import { authorize, can } from "../auth";
import { ApiError } from "../errors";
import { consumerParams, json, nameParam } from "../request";
import { defineRoute, type RouteContext } from "../route";
import type { ConsumerListResponse, DeleteConsumerResponse, QueueInfoResponse, QueueListResponse } from "../../protocol/api";

/** Listing and inspecting queues and consumers, and deleting a consumer. */
export function registerQueueRoutes(app: H3, ctx: RouteContext): void {
  app.get(
    "/api/v1/queues",
    defineRoute(ctx, async (_event, principal) => {
      const names = await listQueues(await ctx.registry.driver());
      return json<QueueListResponse>({ queues: names.filter((q) => can(principal, "read", q) || can(principal, "write", q)) });
    }),
  );

  app.get(
    "/api/v1/queues/:queue",
    defineRoute(ctx, async (event, principal) => {
      const queue = nameParam(event, "queue");
      authorize(principal, "read", queue);
      const stats = await inspectQueue(await ctx.registry.driver(), queue);
      if (!stats) throw notFound(queue);
      return json<QueueInfoResponse>({
        // The Rust server's fields: the current part and the records in it.
        name: stats.name,
        id: stats.currentPart,
        count_pushed: stats.currentCount,
        is_ready: true,
        // Totals over every part.
        parts: stats.parts.length,
        messages: stats.messages,
        bytes: stats.bytes,
        consumers: stats.consumers.length,
      });
    }),
  );

  app.get(
    "/api/v1/queues/:queue/consumers",
    defineRoute(ctx, async (event, principal) => {
      const queue = nameParam(event, "queue");
      authorize(principal, "read", queue);
      const driver = await ctx.registry.driver();
      const stats = await inspectQueue(driver, queue);
      if (!stats) throw notFound(queue);
      const consumers = stats.consumers;
      return json<ConsumerListResponse>({
        queue,
        consumers: consumers.map((c) => ({
          name: c.name,
          part: c.part,
          position: c.position,
          count_popped: c.count,
          lag: c.lag,
          cursor: formatCursor(c),
        })),
      });
    }),
  );

  app.delete(
    "/api/v1/queues/:queue/consumers/:consumer",
    defineRoute(ctx, async (event, principal) => {
      const { queue, consumer } = consumerParams(event, principal);
      await ctx.registry.deleteConsumer(queue, consumer);
      return json<DeleteConsumerResponse>({ queue, consumer, deleted: true });
    }),
  );
}

function notFound(queue: string): ApiError {
  return new ApiError(404, "E_NOT_FOUND", `Queue "${queue}" does not exist.`);
}
