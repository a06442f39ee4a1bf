import type { DeleteScheduleResponse, ScheduleJSON, ScheduleListResponse, ScheduleRequest, ScheduleResponse } from "../../protocol/api";
import { fromBase64, toBase64 } from "../../protocol/base64";
import { utf8 } from "../../protocol/utf8";
import { NAME_RULE, isValidQueueName } from "../../src/core/names";
import type { MessageInput } from "../../src/format/message";
import type { Schedule, ScheduleInput } from "../../src/writer/schedules";
import { MAX_EVERY_MS, MIN_EVERY_MS } from "../../src/writer/schedules";
import { authorize } from "../auth";
import { ApiError } from "../errors";
import { bodyErrors, conflictRef, errorResponses, jsonContent } from "../openapi";
import { json, nameParam, readBodyLimited } from "../request";
import type { ApiRoute, RouteContext } from "../route";
import { getRouterParam, type H3Event } from "h3";

const KEYS = ["cron", "tz", "everyMs", "message", "encoding"] as const;

const time = (description: string) => ({
  [description]: { type: "string", format: "date-time" },
  [`${description}Ms`]: { type: "integer" },
});

const scheduleSchema = {
  type: "object",
  required: ["name", "since", "sinceMs"],
  properties: {
    name: { type: "string" },
    cron: { type: "string" },
    tz: { type: "string" },
    everyMs: { type: "integer" },
    message: { type: "string", description: "What each firing produces: text, or base64 bytes (encoding); absent: the firing's {schedule, tick, at}" },
    encoding: { const: "base64" },
    ...time("since"),
    ...time("lastFiredAt"),
    ...time("nextAt"),
  },
};

/**
 * Schedules (src/writer/schedules.ts): `PUT`, `GET` and `DELETE` under `/api/v1/queues/{queue}/schedules`.
 * Set and removed through the queue's writer (taken from the instance holding it, as a produce
 * takes it); listed from storage.
 */
export function scheduleRoutes(ctx: RouteContext): ApiRoute[] {
  const { limits } = ctx.options;
  return [
    {
      method: "GET",
      route: "/api/v1/queues/:queue/schedules",
      openapi: {
        operationId: "listSchedules",
        summary: "The queue's schedules, by name, with their last and next firing",
        responses: {
          ...errorResponses,
          "200": {
            description: "the schedules",
            content: jsonContent({
              type: "object",
              required: ["queue", "schedules"],
              properties: { queue: { type: "string" }, schedules: { type: "array", items: scheduleSchema } },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "read", queue);
        const schedules = await ctx.registry.schedules.list(queue);
        return json<ScheduleListResponse>({ queue, schedules: schedules.map(scheduleJSON) });
      },
    },
    {
      method: "PUT",
      route: "/api/v1/queues/:queue/schedules/:schedule",
      openapi: {
        operationId: "setSchedule",
        summary:
          "Set a schedule (created, or updated in place; the queue is created if missing): a message produced at each tick, exactly once across instances (by the holder of the queue's writer); ticks missed while no instance held it fire once, for the latest",
        requestBody: {
          required: true,
          content: jsonContent({
            type: "object",
            description: "Exactly one of cron and everyMs",
            properties: {
              cron: { type: "string", description: "5 fields (minute first), or 6 (second first)" },
              tz: { type: "string", description: "The IANA time zone cron is read in (default UTC)" },
              everyMs: { type: "integer", minimum: MIN_EVERY_MS, maximum: MAX_EVERY_MS, description: "A tick every this many ms from when it is set" },
              message: {
                description: "What each firing produces: a string as text, any other JSON value as its JSON text; none: the firing's {schedule, tick, at}",
              },
              encoding: { const: "base64", description: "message is a base64 string, stored as bytes" },
            },
          }),
        },
        responses: {
          ...errorResponses,
          ...bodyErrors,
          "409": conflictRef,
          "200": { description: "updated", content: jsonContent(responseSchema()) },
          "201": { description: "created", content: jsonContent(responseSchema()) },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        const name = scheduleName(event);
        authorize(principal, "write", queue);
        const input = scheduleBody(utf8.decode(await readBodyLimited(event.req, limits.maxBodyBytes)));
        const { schedule, created } = await ctx.registry.schedules.set(queue, name, input);
        return json<ScheduleResponse>({ queue, created, schedule: scheduleJSON(schedule) }, created ? 201 : 200);
      },
    },
    {
      method: "DELETE",
      route: "/api/v1/queues/:queue/schedules/:schedule",
      openapi: {
        operationId: "deleteSchedule",
        summary: "Remove a schedule (404 when there is none)",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: "removed",
            content: jsonContent({
              type: "object",
              required: ["queue", "name", "deleted"],
              properties: { queue: { type: "string" }, name: { type: "string" }, deleted: { const: true } },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        const name = scheduleName(event);
        authorize(principal, "write", queue);
        if (!(await ctx.registry.schedules.remove(queue, name))) throw new ApiError(404, "E_NOT_FOUND", `Queue "${queue}" has no schedule "${name}".`);
        return json<DeleteScheduleResponse>({ queue, name, deleted: true });
      },
    },
  ];
}

function responseSchema() {
  return {
    type: "object",
    required: ["queue", "created", "schedule"],
    properties: { queue: { type: "string" }, created: { type: "boolean" }, schedule: scheduleSchema },
  };
}

/** The schedule's name from the path, checked as a queue name is. */
function scheduleName(event: H3Event): string {
  let name: string;
  try {
    name = decodeURIComponent(getRouterParam(event, "schedule") ?? "");
  } catch {
    throw new ApiError(400, "E_NAME", "Invalid schedule name: bad percent-encoding.");
  }
  if (!isValidQueueName(name)) throw new ApiError(400, "E_NAME", `Invalid schedule name ${JSON.stringify((name as string).slice(0, 64))}: use ${NAME_RULE}.`);
  return name;
}

/** The body, checked (400 `E_BODY` saying what is allowed); the timing itself is checked by the engine (`E_OPTION`). */
export function scheduleBody(text: string): ScheduleInput {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, "E_BODY", 'The schedule body is not valid JSON: send e.g. {"cron": "0 * * * *", "message": "hourly"} or {"everyMs": 60000}.');
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new ApiError(400, "E_BODY", 'The schedule body must be a JSON object: {"cron": ...} or {"everyMs": ...}.');
  const unknown = Object.keys(body).filter((key) => !(KEYS as readonly string[]).includes(key));
  if (unknown.length > 0) throw new ApiError(400, "E_BODY", `Unknown key ${JSON.stringify(unknown[0])}: use ${KEYS.join(", ")}.`);
  const { cron, tz, everyMs, message, encoding } = body as ScheduleRequest;
  if (encoding !== undefined && encoding !== "base64")
    throw new ApiError(400, "E_BODY", `Invalid encoding ${JSON.stringify(encoding)}: use "base64" or leave it out.`);
  let data: MessageInput | undefined = message as MessageInput | undefined;
  if (encoding === "base64") {
    if (typeof message !== "string") throw new ApiError(400, "E_BODY", 'With "encoding": "base64", message must be a base64 string.');
    data = fromBase64(message);
  }
  return { cron, tz, everyMs, ...(data === undefined ? {} : { message: data }) };
}

/** A schedule as the API answers it. */
export function scheduleJSON(s: Schedule): ScheduleJSON {
  const iso = (ms: number | undefined, name: string) => (ms === undefined ? {} : { [name]: new Date(ms).toISOString(), [`${name}Ms`]: ms });
  return {
    name: s.name,
    ...(s.cron !== undefined ? { cron: s.cron, tz: s.tz } : { everyMs: s.everyMs }),
    ...(s.message === undefined ? {} : typeof s.message === "string" ? { message: s.message } : { message: toBase64(s.message), encoding: "base64" as const }),
    ...(iso(s.since, "since") as { since: string; sinceMs: number }),
    ...iso(s.lastFiredAt, "lastFiredAt"),
    ...iso(s.nextAt, "nextAt"),
  };
}
