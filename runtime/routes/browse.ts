import { FastResponse } from "srvx";
import { isCursor } from "../../protocol/cursor";
import { BROWSE_DEFAULTS, BROWSE_MAX_LIMIT, browseMessages, type BrowseFrom } from "../../src/inspect/browse";
import { MAX_PARTITIONS } from "../../src/partitions/declaration";
import { authorize } from "../auth";
import { encodeMessagesJSON } from "../consume-json";
import { ApiError, JSON_TYPE } from "../errors";
import { errorRef, errorResponses, jsonContent } from "../openapi";
import { intParam, nameParam } from "../request";
import type { ApiRoute, RouteContext } from "../route";

const FROM_RULE =
  "from=earliest, from=latest (the newest page), from=<cursor> (the page starts after its message; a partitioned queue's: p<partition>:<cursor>,...), part=<n>&seq=<n> (starts at that message; a partitioned queue's with partition=<k>), or time=<ISO 8601 date-time or ms since the epoch>";
/** A partitioned queue's cursor, checked further by the engine against its partitions. */
const PARTITIONED_CURSOR = /^p\d{1,4}:\d{1,15}\.\d{1,15}\.\d{1,10}(,p\d{1,4}:\d{1,15}\.\d{1,15}\.\d{1,10}){0,1023}$/;

/** The message browser: `GET /api/v1/queues/{queue}/browse`, messages read without any consumer (the read right). */
export function browseRoutes(ctx: RouteContext): ApiRoute[] {
  const maxBytesCap = ctx.options.limits.maxResponseBytes;
  return [
    {
      method: "GET",
      route: "/api/v1/queues/:queue/browse",
      openapi: {
        operationId: "browseQueue",
        summary:
          "Read a page of messages without any consumer (no position moves, nothing is created): from the oldest, the newest page, a cursor, a message by part and sequence, or a time; `next` is where the following page starts (null at the end). A partitioned queue: a page takes from every partition in turn (each message says its partition, `next` names each partition's place), or from `partition` alone",
        parameters: [
          {
            name: "from",
            in: "query",
            description:
              '"earliest" (default), "latest" (the last `limit` messages) or a cursor (the page starts after its message); not with part/seq or time',
            schema: { type: "string" },
          },
          { name: "part", in: "query", description: "With seq: the page starts at this message", schema: { type: "integer", minimum: 0 } },
          { name: "seq", in: "query", schema: { type: "integer", minimum: 1 } },
          {
            name: "partition",
            in: "query",
            description: "A partitioned queue: this partition alone",
            schema: { type: "integer", minimum: 0, maximum: MAX_PARTITIONS - 1 },
          },
          {
            name: "time",
            in: "query",
            description: "Every message written from then on, and up to the queue's indexInterval before",
            schema: {
              oneOf: [
                { type: "string", format: "date-time" },
                { type: "integer", description: "ms since the epoch" },
              ],
            },
          },
          { name: "limit", in: "query", schema: { type: "integer", minimum: 1, maximum: BROWSE_MAX_LIMIT, default: BROWSE_DEFAULTS.limit } },
          {
            name: "max_bytes",
            in: "query",
            description: "The page stops once its bodies reach this many bytes (one message at least)",
            schema: { type: "integer", minimum: 1, maximum: maxBytesCap, default: Math.min(BROWSE_DEFAULTS.maxBytes, maxBytesCap) },
          },
        ],
        responses: {
          ...errorResponses,
          "409": errorRef,
          "200": {
            description: "a page",
            content: jsonContent({
              type: "object",
              properties: {
                queue: { type: "string" },
                next: { type: ["string", "null"] },
                messages: { type: "array", items: { $ref: "#/components/schemas/Message" } },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "read", queue);
        const url = event.url;
        const from = browseFrom(url);
        const limit = intParam(url, "limit", 1, BROWSE_MAX_LIMIT, BROWSE_DEFAULTS.limit);
        const maxBytes = intParam(url, "max_bytes", 1, maxBytesCap, Math.min(BROWSE_DEFAULTS.maxBytes, maxBytesCap));
        const partition = url.searchParams.has("partition") ? intParam(url, "partition", 0, MAX_PARTITIONS - 1, 0) : undefined;
        const { zstd, onProblem } = ctx.options;
        // Text stays in its UTF-8 bytes: written out as consume writes it.
        const page = await browseMessages(await ctx.registry.driver(), queue, {
          from,
          limit,
          maxBytes,
          raw: true,
          onProblem,
          ...(zstd ? { zstd } : {}),
          ...(partition === undefined ? {} : { partition }),
        });
        const head = `{"queue":${JSON.stringify(queue)},"next":${page.next === null ? "null" : JSON.stringify(page.next)},"messages":[`;
        return new FastResponse(encodeMessagesJSON(head, page.messages), { headers: { "content-type": JSON_TYPE } });
      },
    },
  ];
}

/** Where the page starts, from `from`, `part` with `seq`, or `time` (one of them; none: the oldest). */
function browseFrom(url: URL): BrowseFrom {
  const query = url.searchParams;
  const given = ["from", "part", "seq", "time"].filter((name) => query.has(name));
  const bad = (what: string) => new ApiError(400, "E_PARAM", `${what}: use ${FROM_RULE}.`);
  if (given.some((name) => query.getAll(name).length > 1)) throw bad(`Give each of ${given.join(", ")} once`);
  if (given.includes("part") !== given.includes("seq")) throw bad("part and seq go together");
  if (given.length > (given.includes("part") ? 2 : 1)) throw bad(`Give one start, not ${given.join(" and ")}`);
  if (query.has("part")) {
    const part = intParam(url, "part", 0, Number.MAX_SAFE_INTEGER, 0);
    const seq = intParam(url, "seq", 1, 2 ** 32 - 1, 1);
    return { part, seq };
  }
  const time = query.get("time");
  if (time !== null) {
    if (/^\d{1,16}$/.test(time)) return { time: Number(time) };
    if (/^\d{4}-\d{2}-\d{2}/.test(time) && Number.isFinite(Date.parse(time))) return { time };
    throw bad(`Invalid time ${JSON.stringify(time)}`);
  }
  const from = query.get("from") ?? "earliest";
  if (from === "earliest" || from === "latest" || isCursor(from) || PARTITIONED_CURSOR.test(from)) return from;
  throw bad(`Invalid from ${JSON.stringify(from)}`);
}
