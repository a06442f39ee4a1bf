import { errorRef, jsonContent, openAPIDocument, unauthorizedRef } from "../openapi";
import { json } from "../request";
import type { ApiRoute, RouteContext } from "../route";
import type { HealthResponse } from "../../protocol/api";
import { browseRoutes } from "./browse";
import { consumeRoutes } from "./consume";
import { dashboardRoutes } from "./dashboard";
import { outcomeRoutes } from "./outcomes";
import { overviewRoutes } from "./overview";
import { metricsRoutes } from "./metrics";
import { produceRoutes } from "./produce";
import { pruneRoutes } from "./prune";
import { queueRoutes } from "./queues";
import { scheduleRoutes } from "./schedules";
import { sharedRoutes } from "./shared";

const OPENAPI_PATH = "/api/v1/openapi.json";

/**
 * The route table: every route of the API, once. `registerRoutes` registers it (and answers
 * 405 from it), the OpenAPI document lists it, in this order.
 */
export function apiRoutes(ctx: RouteContext): ApiRoute[] {
  const routes: ApiRoute[] = [
    {
      method: "GET",
      route: "/health",
      open: true,
      openapi: {
        operationId: "getHealth",
        summary: "Liveness (never behind auth)",
        security: [],
        responses: {
          "200": {
            description: "ok",
            content: jsonContent({ type: "object", required: ["status", "version"], properties: { status: { const: "ok" }, version: { type: "string" } } }),
          },
        },
      },
      handler: () => json<HealthResponse>({ status: "ok", version: ctx.options.version }),
    },
    {
      method: "GET",
      route: OPENAPI_PATH,
      openapi: {
        operationId: "getOpenAPIDocument",
        summary: "This document",
        responses: { "401": unauthorizedRef, "500": errorRef, "200": { description: "OpenAPI 3.1", content: jsonContent({ type: "object" }) } },
      },
      // Mounted in another h3 app, the path carries its prefix: the API is there, not at the host's root.
      handler: (event) => {
        const path = event.url.pathname;
        return json(openAPIDocument(ctx.options, routes, (path.endsWith(OPENAPI_PATH) && path.slice(0, -OPENAPI_PATH.length)) || "/"));
      },
    },
    ...queueRoutes(ctx),
    ...produceRoutes(ctx),
    ...consumeRoutes(ctx),
    ...sharedRoutes(ctx),
    ...outcomeRoutes(ctx),
    ...pruneRoutes(ctx),
    ...scheduleRoutes(ctx),
    ...metricsRoutes(ctx),
    ...dashboardRoutes(ctx),
    ...overviewRoutes(ctx),
    ...browseRoutes(ctx),
  ];
  return routes;
}
