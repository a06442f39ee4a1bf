/**
 * Outcomes of a shared consumer's messages (docs/http.md, "Outcomes"): `GET .../events`, every
 * outcome as server-sent events, and `GET .../outcome`, one message's end (a long poll). Both
 * read storage (no consumer is opened, no lock taken): they work for a consumer another
 * instance holds, on plain and partitioned queues alike.
 */
import type { OutcomeResponse } from "../../protocol/api";
import { followOutcomes, outcomeCursorNow, parseOutcomeCursor, waitForOutcome } from "../../src/consumers/shared/outcomes";
import type { OutcomeEvent } from "../../src/consumers/types";
import { MAX_PARTITIONS } from "../../src/partitions/declaration";
import { linkSignals } from "../consumer-slot";
import { ApiError } from "../errors";
import { errorResponses, jsonContent } from "../openapi";
import { intQuery, textQuery } from "../query";
import { queueForm } from "../queue-form";
import { consumerParams, json } from "../request";
import type { ApiRoute, RouteContext } from "../route";

/** A comment this often keeps proxies (and the client's silence check) from taking the stream for dead. */
export const KEEP_ALIVE_MS = 15_000;
const FROM = ["now", "oldest"] as const;

const fromQuery = textQuery(
  "from",
  'Without a cursor to resume after: "now" (default: what happens from now on) or "oldest" (every outcome still kept first)',
  {
    type: "string",
    enum: FROM,
    default: "now",
  },
);
const afterQuery = textQuery("after", "Resume after this event's cursor (its `id`); the Last-Event-ID header, when sent, is taken instead");
const partQuery = intQuery("part", { min: 0, max: Number.MAX_SAFE_INTEGER, description: "The message's part (as produce or lease gave it)" });
const offsetQuery = intQuery("offset", { min: 0, max: Number.MAX_SAFE_INTEGER, description: "The message's offset in its part" });
const partitionQuery = intQuery("partition", { min: 0, max: MAX_PARTITIONS - 1, description: "A partitioned queue's message: its partition (required there)" });

/** `GET .../events` and `GET .../outcome`: the read right on the queue. */
export function outcomeRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  const timeoutQuery = intQuery("timeoutMs", {
    min: 0,
    max: limits.maxTimeoutMs,
    fallback: 0,
    description: "Wait up to this long for the message's end (a long poll); 0 answers at once",
  });
  return [
    {
      method: "GET",
      route: "/api/v1/queues/:queue/consumers/:consumer/events",
      query: [fromQuery, afterQuery],
      noHead: true,
      openapi: {
        operationId: "followOutcomes",
        summary:
          "A shared consumer's outcome events as server-sent events: `progress`, `completed` (with the ack's result), `failed` (error, retryAt), `dead` (error); each `id` is a cursor to resume after (Last-Event-ID, or `after`); a comment every 15 s keeps the stream open",
        parameters: [
          {
            name: "Last-Event-ID",
            in: "header",
            required: false,
            description: "Resume after this event's cursor (what EventSource sends when it connects again)",
            schema: { type: "string" },
          },
        ],
        responses: {
          ...errorResponses,
          "200": {
            description: "`text/event-stream`: `id: <cursor>`, `event: <kind>`, `data: <the OutcomeEvent as JSON>` per event",
            content: { "text/event-stream": { schema: { type: "string", description: "Each event's data: an OutcomeEvent (components/schemas) as JSON" } } },
          },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const url = event.url;
        const from = fromQuery.read(url) ?? "now";
        if (!FROM.includes(from as (typeof FROM)[number])) throw new ApiError(400, "E_PARAM", `Invalid from ${JSON.stringify(from)}: use "now" or "oldest".`);
        // EventSource sends the header when it connects again; the URL still has the first `after`.
        let after = event.req.headers.get("last-event-id") ?? afterQuery.read(url);
        const { partitions } = await queueForm(ctx.registry, queue);
        if (after !== undefined) checkCursor(after, partitions);
        const driver = await ctx.registry.driver();
        // "now" is this request's: fixed before answering (what happens once the client has the
        // answer is in the stream), and sent as the first id (a reconnection before any event resumes there).
        if (after === undefined && from === "now") after = await outcomeCursorNow(queue, consumer, { driver });
        // Counted in while it streams: closing the app ends it and waits for it.
        const leave = ctx.registry.enter();
        const body = eventStream(
          (signal) => followOutcomes(queue, consumer, { driver, from: from as (typeof FROM)[number], after, signal }),
          [event.req.signal, ctx.registry.closing],
          { firstId: after, leave, onError: (error) => ctx.options.logger.error("[v-queue] [http] outcome events:", error) },
        );
        return new Response(body, { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "x-accel-buffering": "no" } });
      },
    },
    {
      method: "GET",
      route: "/api/v1/queues/:queue/consumers/:consumer/outcome",
      query: [partQuery, offsetQuery, partitionQuery, timeoutQuery],
      openapi: {
        operationId: "getOutcome",
        summary:
          "One message's end: its `completed` or `dead` outcome, waiting up to timeoutMs for it (a long poll); `outcome` null when it has not ended (or its outcome is no longer kept)",
        responses: {
          ...errorResponses,
          "200": {
            description: "the outcome, or null",
            content: jsonContent({
              type: "object",
              required: ["outcome"],
              properties: { outcome: { oneOf: [{ $ref: "#/components/schemas/OutcomeEvent" }, { type: "null" }] } },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const { queue, consumer } = consumerParams(event, principal);
        const url = event.url;
        const part = partQuery.read(url);
        const offset = offsetQuery.read(url);
        const partition = partitionQuery.read(url);
        const timeoutMs = timeoutQuery.read(url);
        if (part === undefined || offset === undefined)
          throw new ApiError(400, "E_PARAM", "Expected part and offset: the message's place, as produce (first, last) or lease gave it.");
        const { partitions } = await queueForm(ctx.registry, queue);
        if (partitions === undefined && partition !== undefined)
          throw new ApiError(400, "E_PARAM", `Queue "${queue}" is not partitioned: a message of it has no partition.`);
        if (partitions !== undefined && (partition === undefined || partition >= partitions))
          throw new ApiError(400, "E_PARAM", `Queue "${queue}" has ${partitions} partitions: give the message's partition, from 0 to ${partitions - 1}.`);
        const polled = timeoutMs > 0 ? ctx.metrics?.longPoll() : undefined;
        // Not AbortSignal.any: it would keep every request's signal linked to the app's (nodejs/node#55351).
        const linked = linkSignals(event.req.signal, ctx.registry.closing);
        const driver = await ctx.registry.driver();
        const outcome = await waitForOutcome(queue, consumer, { part, offset, partition }, { driver, timeoutMs, signal: linked.signal }).finally(() => {
          linked.dispose();
          polled?.();
        });
        return json<OutcomeResponse>({ outcome: outcome ?? null });
      },
    },
  ];
}

// --- Internal helpers ---

/** An event's cursor as the stream gave it (an id; a partitioned queue's `<partition>:<id>,...`): refused here (400), not once the stream is open. */
function checkCursor(cursor: string, partitions: number | undefined): void {
  try {
    parseOutcomeCursor(cursor, partitions !== undefined, "after");
  } catch (error) {
    throw new ApiError(400, "E_PARAM", (error as Error).message);
  }
}

/**
 * The SSE body: a comment at once (the client sees the stream open, with `firstId` as where it
 * is), each event as it comes (pulled: a slow client slows the reading, nothing piles up), a
 * comment every `KEEP_ALIVE_MS`. Ends when one of `until` aborts (the client went, the app
 * closes) or the client cancels it; then `leave`.
 */
function eventStream(
  follow: (signal: AbortSignal) => AsyncGenerator<OutcomeEvent>,
  until: AbortSignal[],
  options: { firstId: string | undefined; leave: () => void; onError: (error: unknown) => void },
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const stop = new AbortController();
  const outcomes = follow(stop.signal);
  let keepAlive: ReturnType<typeof setInterval> | undefined;
  let stream!: ReadableStreamDefaultController<Uint8Array>;
  const end = () => {
    if (stop.signal.aborted) return;
    stop.abort();
    for (const signal of until) signal.removeEventListener("abort", end);
    clearInterval(keepAlive);
    options.leave();
    try {
      stream.close();
    } catch {
      // closed already (the client cancelled it)
    }
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      stream = controller;
      controller.enqueue(encoder.encode(`: outcome events\n${options.firstId === undefined ? "" : `id: ${options.firstId}\n`}\n`));
      keepAlive = setInterval(() => controller.enqueue(encoder.encode(": keep-alive\n\n")), KEEP_ALIVE_MS);
      for (const signal of until) signal.addEventListener("abort", end, { once: true });
      if (until.some((signal) => signal.aborted)) end();
    },
    async pull(controller) {
      try {
        const { value, done } = await outcomes.next();
        if (stop.signal.aborted) return;
        if (done) return end();
        controller.enqueue(encoder.encode(`id: ${value.cursor}\nevent: ${value.kind}\ndata: ${JSON.stringify(value)}\n\n`));
      } catch (error) {
        if (!stop.signal.aborted) options.onError(error);
        end();
      }
    },
    cancel: end,
  });
}
