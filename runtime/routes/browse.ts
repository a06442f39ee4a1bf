import { FastResponse } from "srvx";
import { isCursor } from "../../protocol/cursor";
import { BROWSE_DEFAULTS, BROWSE_MAX_LIMIT, browseMessages, type BrowseFrom } from "../../src/inspect/browse";
import { MAX_PARTITIONS } from "../../src/partitions/declaration";
import { authorize } from "../auth";
import { encodeMessagesJSON } from "../consume-json";
import { ApiError, JSON_TYPE } from "../errors";
import { errorResponses, jsonContent, conflictRef } from "../openapi";
import { nameParam } from "../request";
import { intQuery, textQuery } from "../query";
import type { ApiRoute, RouteContext } from "../route";

const FROM_RULE =
  "from=earliest, from=latest (the newest page), from=<cursor> (the page starts after its message; a partitioned queue's: p<partition>:<cursor>,...), part=<n>&seq=<n> (starts at that message; a partitioned queue's with partition=<k>), or time=<ISO 8601 date-time or ms since the epoch>";
/** A partitioned queue's cursor, checked further by the engine against its partitions. */
const PARTITIONED_CURSOR = /^p\d{1,4}:\d{1,15}\.\d{1,15}\.\d{1,10}(,p\d{1,4}:\d{1,15}\.\d{1,15}\.\d{1,10}){0,1023}$/;

const fromQuery = textQuery(
  "from",
  '"earliest" (default), "latest" (the last `limit` messages) or a cursor (the page starts after its message; a partitioned queue\'s: p<partition>:<cursor>,...); not with part/seq or time',
);
const partQuery = intQuery("part", { min: 0, max: Number.MAX_SAFE_INTEGER, description: "With seq: the page starts at this message" });
const seqQuery = intQuery("seq", { min: 1, max: 2 ** 32 - 1, description: "With part: the message's sequence number in its part, from 1" });
const timeQuery = textQuery("time", "Every message written from then on, and up to the queue's indexInterval before", {
  oneOf: [
    { type: "string", format: "date-time" },
    { type: "integer", description: "ms since the epoch" },
  ],
});
const partitionQuery = intQuery("partition", { min: 0, max: MAX_PARTITIONS - 1, description: "A partitioned queue: this partition alone" });
const limitQuery = intQuery("limit", { min: 1, max: BROWSE_MAX_LIMIT, fallback: BROWSE_DEFAULTS.limit, description: "Most messages in the page" });

/** The message browser: `GET /api/v1/queues/{queue}/browse`, messages read without any consumer (the read right). */
export function browseRoutes(ctx: RouteContext): ApiRoute[] {
  const maxBytesCap = ctx.options.limits.maxResponseBytes;
  const maxBytesQuery = intQuery("max_bytes", {
    min: 1,
    max: maxBytesCap,
    fallback: Math.min(BROWSE_DEFAULTS.maxBytes, maxBytesCap),
    description: "The page stops once its bodies reach this many bytes (one message at least)",
  });
  return [
    {
      method: "GET",
      route: "/api/v1/queues/:queue/browse",
      query: [fromQuery, partQuery, seqQuery, partitionQuery, timeQuery, limitQuery, maxBytesQuery],
      openapi: {
        operationId: "browseQueue",
        summary:
          "Read a page of messages without any consumer (no position moves, nothing is created): from the oldest, the newest page, a cursor, a message by part and sequence, or a time; `next` is where the following page starts (null at the end). A partitioned queue: a page takes from every partition in turn (each message says its partition, `next` names each partition's place), or from `partition` alone",
        responses: {
          ...errorResponses,
          "409": conflictRef,
          "200": {
            description: "a page",
            content: jsonContent({
              type: "object",
              required: ["queue", "next", "messages"],
              properties: {
                queue: { type: "string" },
                next: { type: ["string", "null"], description: "Where the following page starts (from=next); null at the end" },
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
        const limit = limitQuery.read(url);
        const maxBytes = maxBytesQuery.read(url);
        const partition = partitionQuery.read(url);
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
  const starts = [fromQuery, partQuery, seqQuery, timeQuery];
  const given = starts.filter((param) => param.given(url)).map((param) => param.name);
  const bad = (what: string) => new ApiError(400, "E_PARAM", `${what}: use ${FROM_RULE}.`);
  if (given.includes("part") !== given.includes("seq")) throw bad("part and seq go together");
  if (given.length > (given.includes("part") ? 2 : 1)) throw bad(`Give one start, not ${given.join(" and ")}`);
  const part = partQuery.read(url);
  if (part !== undefined) return { part, seq: seqQuery.read(url)! };
  const time = timeQuery.read(url);
  if (time !== undefined) {
    if (/^\d{1,16}$/.test(time)) return { time: Number(time) };
    if (/^\d{4}-\d{2}-\d{2}/.test(time) && Number.isFinite(Date.parse(time))) return { time };
    throw bad(`Invalid time ${JSON.stringify(time)}`);
  }
  const from = fromQuery.read(url) ?? "earliest";
  if (from === "earliest" || from === "latest" || isCursor(from) || PARTITIONED_CURSOR.test(from)) return from;
  throw bad(`Invalid from ${JSON.stringify(from)}`);
}
