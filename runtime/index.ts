/**
 * The v-queue HTTP API as an h3 (v2) app: web-standard Request -> Response, no Node built-ins.
 * Use it as `app.fetch(request)`, mount it into another h3 app, or serve it (`v-queue/server`).
 */
import { H3 } from "h3";
import type { MessageInput, MessagePosition } from "../src/format/message";
import type { ProduceOptions, ProduceResult } from "../src/writer/produce";
import type { Schedule, ScheduleInput } from "../src/writer/schedules";
import { assertName } from "../src/core/names";
import { VQueueError } from "../src/core/errors";
import { corsMiddleware } from "./cors";
import { jsonError } from "./errors";
import { requestLogMiddleware } from "./log";
import { resolveQueueAppOptions, type QueueAppOptions } from "./options";
import { ServerMetrics } from "./metrics/server-metrics";
import { Monitor } from "./monitor";
import { QueueRegistry } from "./registry";
import type { LeasingSlot } from "./shared-slot";
import { queueForm } from "./queue-form";
import { registerRoutes, type RouteContext } from "./route";
import { apiRoutes } from "./routes";
import { Tracing } from "./tracing";

export type { AuthOptions, MetricsOptions, MonitorOptions, QueueAppLimits, QueueAppOptions, QueueSettings } from "./options";
export type { AuthUser, ProcessStats, QueueAppLogger } from "./types";
export type { CorsOptions } from "./cors";
export { DEFAULT_LIMITS } from "./options";
export type { HttpErrorCode } from "./errors";
export type { AnySharedSlot, LeasingSlot, SharedSlot } from "./shared-slot";
export type { OrderedSlot } from "./consumer-slot";
export { BATCH_CONTENT_TYPE, decodeBatch, decodeLeases, encodeBatch, encodeLeases, encodeProduceBatch, leaseToken } from "../protocol/binary";
export type { BatchRecord, LeaseRecord } from "../protocol/binary";
export { ProtocolError } from "../protocol/errors";
export type { MessageJSON } from "../protocol/api";

/** The app and the handle that closes its queues. */
export interface QueueHandler {
  app: H3;
  fetch(request: Request): Promise<Response>;
  /**
   * Pushes to `queue` (created if missing) from server code, without HTTP and without auth,
   * through the same open writer as the API. Strings as text, bytes as `O` records, other
   * JSON values as their JSON text.
   */
  push(queue: string, messages: MessageInput | MessageInput[]): Promise<MessagePosition[]>;
  /**
   * The slot of shared consumer `name` of `queue` that the API uses (opened, and the consumer
   * created, on first use): server code leases, acks and nacks on the same consumer as HTTP
   * clients, without HTTP and without auth. Ask for it again for each use: an idle slot may be
   * closed (and is then opened again). A partitioned queue's leases carry their `partition`
   * (and its refs must too), as over HTTP.
   */
  sharedConsumer(queue: string, name: string): Promise<LeasingSlot>;
  /**
   * `push` with a delay (`delayMs`, `at`) and/or an idempotency key (`key`): see the engine's
   * `QueueWriter.produce`. On a partitioned queue (the only way to write one from here: `push`
   * refuses it), the batch goes to one partition: `partitionKey`'s, else the idempotency key's,
   * else one this server holds; the result says which (`partition`).
   */
  produce(
    queue: string,
    messages: MessageInput | MessageInput[],
    options?: ProduceOptions & { partitionKey?: string },
  ): Promise<ProduceResult & { partition?: number }>;
  /**
   * Sets schedule `name` of ordinary queue `queue` (created, or updated in place; the queue is
   * created if missing): a message produced at each tick of `cron` (in `tz`) or every `everyMs`,
   * by whichever instance holds the queue's writer. See the engine's `QueueWriter.schedule`.
   */
  schedule(queue: string, name: string, schedule: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }>;
  /** Removes schedule `name` of `queue`: false when there was none. */
  unschedule(queue: string, name: string): Promise<boolean>;
  /** The schedules of `queue`, with their last and next firing. */
  schedules(queue: string): Promise<Schedule[]>;
  /**
   * Declares the queues the `queues` option makes partitioned (once; requests wait for it
   * anyway). Rejects when one exists with another count or as an ordinary queue: a host awaits
   * it before serving, so a wrong setup stops the start.
   */
  ready(): Promise<void>;
  /** Ends long polls, waits for requests in flight (writes included), closes every queue file. */
  close(): Promise<void>;
}

/** Creates the app and its registry of open queues. */
export function createQueueHandler(options: QueueAppOptions = {}): QueueHandler {
  const resolved = resolveQueueAppOptions(options);
  const metrics = resolved.metrics ? new ServerMetrics() : undefined;
  const registry = new QueueRegistry(resolved, metrics);
  const monitor = new Monitor(registry, resolved.monitor);
  const tracing = new Tracing(resolved.version);
  const ctx: RouteContext = { registry, options: resolved, monitor, metrics, tracing };
  const app = new H3({
    silent: true,
    // Only what escapes the route wrappers (h3's own errors) gets here.
    onError: (error) => {
      const status = (error as { status?: number }).status ?? 500;
      if (status >= 500) resolved.logger.error("[v-queue] [http]", error);
      return jsonError(
        status,
        status === 404 ? "E_ROUTE" : status >= 500 ? "E_INTERNAL" : "E_PARAM",
        status >= 500 ? "Internal server error (logged by the server)." : error.message,
      );
    },
  });

  if (resolved.cors) app.use(corsMiddleware(resolved.cors));
  if (resolved.logRequests) app.use(requestLogMiddleware(resolved.logger));
  // Schedules that could not start their timer when the app was made (workerd) start at the first request.
  app.use(() => registry.schedules.wake());
  registerRoutes(app, ctx, apiRoutes(ctx));

  return {
    app,
    fetch: (request) => Promise.resolve(app.fetch(request)),
    push: async (queue, messages) => {
      assertName(queue, "queue");
      return tracing.traced(
        "send",
        queue,
        undefined,
        undefined,
        (positions) => positions.length,
        () => registry.writers.push(queue, Array.isArray(messages) ? messages : [messages]),
      );
    },
    sharedConsumer: async (queue, name) => {
      assertName(queue, "queue");
      assertName(name, "consumer", queue);
      // Asked each time: a queue missing now may be declared partitioned later.
      return (await queueForm(registry, queue)).leasing(name);
    },
    produce: async (queue, messages, produceOptions = {}) => {
      assertName(queue, "queue");
      const list = Array.isArray(messages) ? messages : [messages];
      const form = await queueForm(registry, queue);
      return tracing.traced(
        "send",
        queue,
        undefined,
        undefined,
        () => list.length,
        () => form.produce(list, produceOptions, (why) => new VQueueError("E_OPTION", why)),
      );
    },
    schedule: async (queue, name, schedule) => {
      assertName(queue, "queue");
      return registry.schedules.set(queue, name, schedule);
    },
    unschedule: async (queue, name) => {
      assertName(queue, "queue");
      return registry.schedules.remove(queue, name);
    },
    schedules: async (queue) => {
      assertName(queue, "queue");
      return registry.schedules.list(queue);
    },
    ready: async () => {
      await resolved.driver.start?.();
      await registry.partitions.startup();
      // The queues with schedules get a writer here if no instance holds theirs.
      await registry.schedules.start();
    },
    close: () => {
      monitor.close();
      return registry.close();
    },
  };
}
