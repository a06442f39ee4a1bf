import { formatCursor } from "../../protocol/cursor";
import type { ConsumerOverviewJSON, OverviewResponse, PartOverviewJSON, QueueDetailResponse, QueueOverviewJSON, RightName } from "../../protocol/api";
import { listStorage } from "../../src/inspect/overview";
import { partDetails } from "../../src/inspect/part-details";
import { queueTotals } from "../../src/log/totals";
import { authorize, can, type Principal } from "../auth";
import { ApiError } from "../errors";
import type { MonitorSnapshot, QueueSample } from "../types";
import { errorRef, errorResponses, jsonContent, serverErrors } from "../openapi";
import { json, nameParam } from "../request";
import { intQuery } from "../query";
import type { ApiRoute, RouteContext } from "../route";

const RIGHTS: RightName[] = ["read", "write", "admin"];
/** `history=N` is checked against this; more than the monitor keeps answers what it keeps. */
const MAX_HISTORY_PARAM = 100_000;

/** What the dashboard reads: every queue at a glance, and one queue in detail, from the monitor's last sample. */
export function overviewRoutes(ctx: RouteContext): ApiRoute[] {
  const maxHistory = ctx.options.monitor.historyPoints;
  const historyQuery = intQuery("history", {
    min: 0,
    max: MAX_HISTORY_PARAM,
    fallback: 0,
    description: `Samples of history to add; at most the monitor's ${maxHistory} are answered`,
  });
  return [
    {
      method: "GET",
      route: "/api/v1/overview",
      query: [historyQuery],
      openapi: {
        operationId: "getOverview",
        summary:
          "Every queue the user may see, with rates and the worst consumer lag, from the monitor's last sample (reads no part file); `history=N` adds the last N samples",
        responses: { "400": errorRef, ...serverErrors, "200": { description: "overview", content: jsonContent({ type: "object" }) } },
      },
      handler: async (event, principal) => {
        const points = Math.min(maxHistory, historyQuery.read(event.url));
        const snapshot = await ctx.monitor.snapshot();
        // A partitioned queue once (its row sums its partitions); its partitions in its detail.
        const queues = snapshot.queues
          .filter((q) => !q.partitionOf && (can(principal, "read", q.name) || can(principal, "write", q.name)))
          .map((q) => queueJSON(ctx, q, principal, points));
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
      query: [historyQuery],
      openapi: {
        operationId: "getQueueOverview",
        summary:
          "A queue in detail for the dashboard: its parts (size, format, compression, age), its consumers of both kinds (position, lag, rate, leases, dead letters, last seen), and `history=N` samples of rates and lag",
        responses: { ...errorResponses, "200": { description: "the queue", content: jsonContent({ type: "object" }) } },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "read", queue);
        const points = Math.min(maxHistory, historyQuery.read(event.url));
        let snapshot = await ctx.monitor.snapshot();
        let sample = find(snapshot, queue);
        // Made since the last sample: one more, before saying it does not exist (a listing, not the
        // totals: those would keep every name asked for).
        if (!sample && (await listStorage(await ctx.registry.driver(), (q) => q === queue)).has(queue))
          sample = find((snapshot = await ctx.monitor.next()), queue);
        if (!sample) throw new ApiError(404, "E_NOT_FOUND", `Queue "${queue}" does not exist.`);
        const deadLetterQueue = ctx.options.sharedFor(queue).deadLetterQueue ?? `${queue}.dead`;
        const partitionRows = sample.partitions === undefined ? undefined : snapshot.queues.filter((q) => q.partitionOf?.queue === queue);
        return json<QueueDetailResponse>({
          queue: queueJSON(ctx, sample, principal, points),
          // A partitioned queue has no parts of its own: each partition's are under `partitions`.
          parts: sample.partitions === undefined ? await partsOf(ctx, queue) : [],
          ...(partitionRows && { partitions: partitionRows.map((q) => ({ partition: q.partitionOf!.partition, ...queueJSON(ctx, q, principal, 0) })) }),
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
            ...(c.shared && {
              inFlight: c.shared.inFlight,
              redelivered: c.shared.redelivered,
              deadLettered: c.shared.deadLettered,
              oldestUnacked: c.shared.oldestUnacked,
            }),
            ...(points > 0 && { history: ctx.monitor.consumerHistory(queue, c.name, points) }),
          })),
          deadLetterQueue: find(snapshot, deadLetterQueue) && can(principal, "read", deadLetterQueue) ? deadLetterQueue : null,
          // Its shared consumers dead-letter to each partition's own <queue>.p<k>.dead unless one is configured.
          ...(partitionRows &&
            ctx.options.sharedFor(queue).deadLetterQueue === undefined && {
              deadLetterQueues: partitionRows.map((q) => `${q.name}.dead`).filter((dead) => find(snapshot, dead) && can(principal, "read", dead)),
            }),
          rights: RIGHTS.filter((right) => can(principal, right)),
        });
      },
    },
  ];
}

function find(snapshot: MonitorSnapshot, queue: string): QueueSample | undefined {
  return snapshot.queues.find((q) => q.name === queue);
}

function queueJSON(ctx: RouteContext, q: QueueSample, principal: Principal | undefined, points: number): QueueOverviewJSON {
  const rights = RIGHTS.filter((right) => can(principal, right, q.name));
  // Listed for a user who may only write to it (to produce), but nothing of what it holds.
  if (!rights.includes("read"))
    return {
      name: q.name,
      messages: 0,
      bytes: 0,
      parts: 0,
      consumers: 0,
      produceRate: 0,
      consumeRate: 0,
      maxLag: 0,
      maxLagConsumer: null,
      producedTotal: 0,
      consumedTotal: 0,
      rights,
    };
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
    rights,
    ...(q.partitions !== undefined && { partitions: q.partitions }),
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
