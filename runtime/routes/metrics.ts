import { FastResponse } from "srvx";
import { EXPOSITION_TYPE } from "../metrics/exposition";
import { renderMetrics } from "../metrics/scrape";
import type { ProcessStats } from "../types";
import { serverErrors } from "../openapi";
import type { ApiRoute, RouteContext } from "../route";

/**
 * `GET /metrics`: Prometheus text from the Monitor's last sample (no storage I/O) and the
 * server's own counters. No route when `metrics` is off; without auth when `metrics.open`.
 */
export function metricsRoutes(ctx: RouteContext): ApiRoute[] {
  const options = ctx.options.metrics;
  const server = ctx.metrics;
  if (!options || !server) return [];
  return [
    {
      method: "GET",
      route: "/metrics",
      ...(options.open ? { noAuth: true as const } : {}),
      openapi: {
        operationId: "getMetrics",
        summary: `Prometheus metrics (text format 0.0.4)${options.open ? ", without auth" : ": the queues the user may read"}`,
        ...(options.open ? { security: [] } : {}),
        responses: { ...serverErrors, "200": { description: "Prometheus text exposition", content: { "text/plain": { schema: { type: "string" } } } } },
      },
      handler: async (_event, principal) => {
        const snapshot = await ctx.monitor.snapshot();
        const text = renderMetrics(snapshot, server, principal, processStats(options.process, ctx));
        return new FastResponse(text, { headers: { "content-type": EXPOSITION_TYPE, "cache-control": "no-store" } });
      },
    },
  ];
}

/** The host's stats; a failing hook costs its series, not the scrape. */
function processStats(hook: (() => ProcessStats) | undefined, ctx: RouteContext): ProcessStats | undefined {
  try {
    return hook?.();
  } catch (error) {
    ctx.options.logger.warn("[v-queue] [metrics] the process stats hook failed:", error);
    return undefined;
  }
}
