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
        responses: { "400": errorRef, ...serverErrors, "200": { description: "overview", content: jsonContent(overviewSchema) } },
      },
      handler: async (event, principal) => {
        const points = Math.min(maxHistory, historyQuery.read(event.url));
        const snapshot = await ctx.monitor.snapshot();
        const seen = (queue: string) => can(principal, "read", queue) || can(principal, "write", queue);
        // A partitioned queue once (its row sums its partitions); its partitions in its detail.
        const queues = snapshot.queues.filter((q) => !q.partitionOf && seen(q.name)).map((q) => queueJSON(ctx, q, principal, points));
        return json<OverviewResponse>({
          version: ctx.options.version,
          user: principal?.username ?? null,
          rights: RIGHTS.filter((right) => can(principal, right)),
          startedAt: snapshot.startedAt,
          sampledAt: snapshot.at,
          sampleMs: snapshot.sampleMs,
          queues,
          pending: (snapshot.pending ?? []).filter(seen),
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
        responses: { ...errorResponses, "200": { description: "the queue", content: jsonContent(queueDetailSchema) } },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "read", queue);
        const points = Math.min(maxHistory, historyQuery.read(event.url));
        // Whole: its dead-letter queue and partitions are looked up in it.
        let snapshot = await ctx.monitor.complete();
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

// --- The answers' schemas (protocol/api.ts has their types)

const integer = { type: "integer" };
const number = { type: "number" };
const rightsSchema = { type: "array", items: { enum: RIGHTS }, description: "What the asking user may do (on this queue, or on some queue)" };
const historySchema = {
  type: "object",
  description: "With history=N: the last N samples, column by column (t in seconds since the epoch)",
  required: ["t"],
  properties: {
    t: { type: "array", items: number },
    produce: { type: "array", items: number, description: "Messages produced per second" },
    consume: { type: "array", items: number, description: "Messages consumed per second" },
    lag: { type: "array", items: integer, description: "Messages not consumed yet (a queue: its worst consumer)" },
  },
};
const queueOverviewProperties = {
  name: { type: "string" },
  messages: integer,
  bytes: { type: "integer", description: "Bytes of its part files" },
  parts: integer,
  consumers: integer,
  produceRate: { type: "number", description: "Messages produced per second, over the last sample interval" },
  consumeRate: { type: "number", description: "Messages consumed per second by all its consumers together" },
  maxLag: { type: "integer", description: "The worst consumer's lag (0 without consumers)" },
  maxLagConsumer: { type: ["string", "null"] },
  producedTotal: integer,
  consumedTotal: integer,
  rights: rightsSchema,
  partitions: { type: "integer", description: "A partitioned queue: its partition count (the numbers are summed over its partitions)" },
  history: historySchema,
};
const QUEUE_OVERVIEW_REQUIRED = Object.keys(queueOverviewProperties).filter((key) => key !== "partitions" && key !== "history");
const queueOverviewSchema = {
  type: "object",
  description: "A queue in the monitor's last sample (a queue the user may only write to: zeros but its name and rights)",
  required: QUEUE_OVERVIEW_REQUIRED,
  properties: queueOverviewProperties,
};
const overviewSchema = {
  type: "object",
  required: ["version", "user", "rights", "startedAt", "sampledAt", "sampleMs", "queues", "pending"],
  properties: {
    version: { type: "string" },
    user: { type: ["string", "null"], description: "The asking user (null without auth)" },
    rights: rightsSchema,
    startedAt: integer,
    sampledAt: { type: "integer", description: "When the sample was taken (ms since the epoch)" },
    sampleMs: { type: "integer", description: "How often samples are taken" },
    queues: { type: "array", items: queueOverviewSchema },
    pending: {
      type: "array",
      items: { type: "string" },
      description:
        "Queues not read yet: only right after a start, when the first sample takes longer than the monitor's firstAnswerMs (they are missing from queues until the sample reaches them); empty otherwise",
    },
  },
};
const queueDetailSchema = {
  type: "object",
  required: ["queue", "parts", "consumers", "deadLetterQueue", "rights"],
  properties: {
    queue: queueOverviewSchema,
    parts: {
      type: "array",
      description: "Its parts (none for a partitioned queue: see each partition's queue)",
      items: {
        type: "object",
        required: ["id", "bytes", "messages", "format", "compressionRatio", "createdAt"],
        properties: {
          id: integer,
          bytes: integer,
          messages: integer,
          format: { enum: ["v2", "v3", null] },
          compressionRatio: { type: ["number", "null"], description: "Body bytes before compression / stored (null: none compressed)" },
          createdAt: { type: ["integer", "null"], description: "When its first message was written (ms since the epoch)" },
        },
      },
    },
    partitions: {
      type: "array",
      description: "A partitioned queue: each partition's row",
      items: { type: "object", required: ["partition", ...QUEUE_OVERVIEW_REQUIRED], properties: { partition: integer, ...queueOverviewProperties } },
    },
    consumers: {
      type: "array",
      items: {
        type: "object",
        required: ["name", "kind", "part", "position", "count", "cursor", "lag", "lagBytes", "rate", "consumedTotal", "lastSeen"],
        properties: {
          name: { type: "string" },
          kind: { enum: ["ordered", "shared"] },
          part: integer,
          position: integer,
          count: integer,
          cursor: { type: "string" },
          lag: integer,
          lagBytes: integer,
          rate: { type: "number", description: "Messages consumed per second over the last sample interval" },
          consumedTotal: integer,
          lastSeen: { type: ["integer", "null"], description: "Last time its position moved or it was handed messages (null: not since start)" },
          inFlight: { type: "integer", description: "Shared consumers: leases running" },
          redelivered: integer,
          deadLettered: integer,
          oldestUnacked: {
            oneOf: [
              { type: "object", required: ["part", "offset", "seq"], properties: { part: integer, offset: integer, seq: integer, deliveries: integer } },
              { type: "null" },
            ],
          },
          history: historySchema,
        },
      },
    },
    deadLetterQueue: { type: ["string", "null"], description: "Its shared consumers' dead-letter queue, when it exists and the user may read it" },
    deadLetterQueues: { type: "array", items: { type: "string" }, description: "A partitioned queue: its partitions' own dead-letter queues" },
    rights: rightsSchema,
  },
};

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
    partitions: q.partitions, // absent from the JSON on a plain queue
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
