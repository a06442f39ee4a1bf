import type { PruneRequest, PruneResponse } from "../../protocol/api";
import { utf8 } from "../../protocol/utf8";
import { pruneQueue, type PruneResult } from "../../src/retention/prune";
import { retentionProblems } from "../../src/options/retention";
import { authorize } from "../auth";
import { ApiError } from "../errors";
import { bodyErrors, errorResponses, jsonContent } from "../openapi";
import { json, nameParam, readBodyLimited } from "../request";
import type { ApiRoute, RouteContext } from "../route";

const PRUNE_BODY_LIMIT = 4096;
const LIMITS = ["maxAgeMs", "maxBytes", "maxParts", "deleteConsumed"] as const;

/** What a prune deleted, of a queue or one partition. */
const pruned = {
  parts: { type: "array", items: { type: "integer" }, description: "The parts deleted" },
  messages: { type: "integer" },
  bytes: { type: "integer" },
  refused: { type: "string", description: "Why nothing could be deleted, when so" },
};
const PRUNED_REQUIRED = ["parts", "messages", "bytes"];

/** Retention on demand: `POST /api/v1/queues/{queue}/prune`. */
export function pruneRoutes(ctx: RouteContext): ApiRoute[] {
  return [
    {
      method: "POST",
      route: "/api/v1/queues/:queue/prune",
      openapi: {
        operationId: "pruneQueue",
        summary:
          "Apply retention now: delete whole sealed parts, oldest first, never the current one; a body with limits replaces the server's for this call (no body: the server's); needs the admin right. A partitioned queue: each partition (the limits apply to each), its results in `partitions`",
        requestBody: {
          required: false,
          content: jsonContent({
            type: "object",
            properties: {
              maxAgeMs: { type: "integer", minimum: 1 },
              maxBytes: { type: "integer", minimum: 1 },
              maxParts: { type: "integer", minimum: 1 },
              deleteConsumed: { type: "boolean" },
            },
          }),
        },
        responses: {
          ...errorResponses,
          ...bodyErrors,
          "200": {
            description: "what was deleted",
            content: jsonContent({
              type: "object",
              required: ["queue", ...PRUNED_REQUIRED],
              properties: {
                queue: { type: "string" },
                ...pruned,
                partitions: {
                  type: "array",
                  description: "A partitioned queue: what was deleted in each partition",
                  items: { type: "object", required: ["partition", ...PRUNED_REQUIRED], properties: { partition: { type: "integer" }, ...pruned } },
                },
              },
            }),
          },
        },
      },
      handler: async (event, principal) => {
        const queue = nameParam(event, "queue");
        authorize(principal, "admin", queue);
        const given = await pruneBody(event.req);
        // Limits given are the ones applied: merged with the server's, `{"maxParts": 10}` would also apply its maxAgeMs.
        const limits = Object.keys(given).length > 0 ? given : (ctx.options.retentionFor(queue) ?? {});
        const result = await pruneQueue(await ctx.registry.driver(), queue, limits);
        return json<PruneResponse>(pruneResponse(result));
      },
    },
  ];
}

/** The API's answer for what `pruneQueue` did (the CLI prints the same from the files). */
export function pruneResponse(result: PruneResult): PruneResponse {
  const answer = (r: PruneResult) => ({
    parts: r.deleted.map((p) => p.part),
    messages: r.messages,
    bytes: r.bytes,
    ...(r.refused ? { refused: r.refused } : {}),
  });
  return {
    queue: result.queue,
    ...answer(result),
    ...(result.partitions ? { partitions: result.partitions.map((p) => ({ partition: p.partition, ...answer(p) })) } : {}),
  };
}

/** The optional body: limits only (how often and how much per round are the server's business). */
async function pruneBody(request: Request): Promise<PruneRequest> {
  const text = utf8.decode(await readBodyLimited(request, PRUNE_BODY_LIMIT)).trim();
  if (text.length === 0) return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ApiError(400, "E_BODY", 'The prune body is not valid JSON: send nothing, or e.g. {"maxParts": 10}.');
  }
  const unknown =
    body && typeof body === "object" && !Array.isArray(body) ? Object.keys(body).filter((key) => !(LIMITS as readonly string[]).includes(key)) : [];
  const problems = [...unknown.map((key) => `Unknown key ${JSON.stringify(key)}: use ${LIMITS.join(", ")}.`), ...retentionProblems(body, "body")];
  if (problems.length > 0) throw new ApiError(400, "E_BODY", problems.join(" "));
  return body as PruneRequest;
}
