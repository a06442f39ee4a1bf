import { formatCursor } from "../../protocol/cursor";
import type { ConsumerOverviewJSON, OverviewResponse, PartOverviewJSON, QueueDetailResponse, QueueOverviewJSON, RightName } from "../../protocol/api";
import { partDetails } from "../../src/part-details";
import { queueTotals } from "../../src/totals";
import { authorize, can, type Principal } from "../auth";
import { ApiError } from "../errors";
import type { MonitorSnapshot, QueueSample } from "../monitor";
import { errorResponses, jsonContent } from "../openapi";
import { intParam, json, nameParam } from "../request";
import type { ApiRoute, RouteContext } from "../route";

const RIGHTS: RightName[] = ["read", "write", "admin"];

/** What the dashboard reads: every queue at a glance, and one queue in detail, from the monitor's last sample. */
export function overviewRoutes(ctx: RouteContext): ApiRoute[] {
  const maxHistory = ctx.options.monitor.historyPoints;
  return [
    {
      method: "GET",
      route: "/api/v1/overview",
      openapi: {
        summary: "Every queue the user may see, with rates and the worst consumer lag, from the monitor's last sample (reads no part file); `history=N` adds the last N samples",
        parameters: [{ name: "history", in: "query", schema: { type: "integer", minimum: 0, maximum: maxHistory } }],
        responses: { ...errorResponses, "200": { description: "overview", content: jsonContent({ type: "object" }) } },
      },
      handler: async (event, principal) => {
        const points = intParam(event.url, "history", 0, maxHistory, 0);
        const snapshot = await ctx.monitor.snapshot();
        const queues = snapshot.queues.filter((q) => can(principal, "read", q.name) || can(principal, "write", q.name)).map((q) => queueJSON(ctx, q, principal, points));
        return json<OverviewResponse>({
          version: ctx.options.version,
          user: principal?.username ?? null,
          rights: RIGHTS.filter((right) => can(principal, right)),
          startedAt: snapshot.startedAt,
          sampledAt: snapshot.at,
          sampleMs: snapshot.sampleMs,
          queues,
        });
      },
    },
    {
      method: "GET",
      route: "/api/v1/queues/:queue/overview",
      openapi: {
        summary: "A queue in detail for the dashboard: its parts (size, format, compression, age), its consumers of both kinds (position, lag, rate, leases, dead letters, last seen), and `history=N` samples of rates and lag",
        parameters: [{ name: "history", in: "query", schema: { type: "integer", minimum: 0, maximum: maxHistory } }],
        responses: { ...errorResponses, "200": { description: "the queue", content: jsonContent({ type: "object" }) } },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "read", queue);
        const points = intParam(event.url, "history", 0, maxHistory, 0);
        let snapshot = await ctx.monitor.snapshot();
        let sample = find(snapshot, queue);
        // Made since the last sample: one more, before saying it does not exist.
        if (!sample && (await queueTotals(await ctx.registry.driver(), queue))) sample = find((snapshot = await ctx.monitor.next()), queue);
        if (!sample) throw new ApiError(404, "E_NOT_FOUND", `Queue "${queue}" does not exist.`);
        const deadLetterQueue = ctx.options.sharedFor(queue).deadLetterQueue ?? `${queue}.dead`;
        return json<QueueDetailResponse>({
          queue: queueJSON(ctx, sample, principal, points),
          parts: await partsOf(ctx, queue),
          consumers: sample.consumers.map((c): ConsumerOverviewJSON => ({
            name: c.name,
            kind: c.kind,
            part: c.part,
            position: c.position,
            count: c.count,
            cursor: formatCursor(c),
            lag: c.lag,
            lagBytes: c.lagBytes,
            rate: c.rate,
            consumedTotal: c.consumedTotal,
            lastSeen: c.lastSeen,
            ...(c.shared && { inFlight: c.shared.inFlight, redelivered: c.shared.redelivered, deadLettered: c.shared.deadLettered, oldestUnacked: c.shared.oldestUnacked }),
            ...(points > 0 && { history: ctx.monitor.consumerHistory(queue, c.name, points) }),
          })),
          deadLetterQueue: find(snapshot, deadLetterQueue) && (can(principal, "read", deadLetterQueue) || can(principal, "write", deadLetterQueue)) ? deadLetterQueue : null,
        });
      },
    },
  ];
}

function find(snapshot: MonitorSnapshot, queue: string): QueueSample | undefined {
  return snapshot.queues.find((q) => q.name === queue);
}

function queueJSON(ctx: RouteContext, q: QueueSample, principal: Principal | undefined, points: number): QueueOverviewJSON {
  return {
    name: q.name,
    messages: q.messages,
    bytes: q.bytes,
    parts: q.parts,
    consumers: q.consumers.length,
    produceRate: round(q.produceRate),
    consumeRate: round(q.consumeRate),
    maxLag: q.maxLag,
    maxLagConsumer: q.maxLagConsumer,
    producedTotal: q.producedTotal,
    consumedTotal: q.consumedTotal,
    rights: RIGHTS.filter((right) => can(principal, right, q.name)),
    ...(points > 0 && { history: ctx.monitor.history(q.name, points) }),
  };
}

/** The queue's parts now: sizes from the running totals, format, compression and age from part-details.ts (a sealed part is read once per process). */
async function partsOf(ctx: RouteContext, queue: string): Promise<PartOverviewJSON[]> {
  const driver = await ctx.registry.driver();
  return partDetails(driver, queue, (await queueTotals(driver, queue))?.parts() ?? []);
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
