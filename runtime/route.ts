import type { H3Event } from "h3";
import { authenticate, type Principal } from "./auth";
import { errorResponse } from "./errors";
import type { ResolvedQueueAppOptions } from "./options";
import type { QueueRegistry } from "./registry";

export interface RouteContext {
  registry: QueueRegistry;
  options: ResolvedQueueAppOptions;
}

export type RouteHandler = (event: H3Event, principal: Principal | undefined) => Response | Promise<Response>;

/**
 * Wraps an API handler: counts it in (graceful close waits for it), checks Basic auth, and
 * turns anything thrown into the JSON error body. Done here rather than in h3's `onError`
 * so it also holds when the app is mounted into another h3 app (which has its own).
 */
export function defineRoute(ctx: RouteContext, handler: RouteHandler, { auth = true }: { auth?: boolean } = {}): (event: H3Event) => Promise<Response> {
  return async (event) => {
    let done: (() => void) | undefined;
    try {
      const principal = auth && ctx.options.auth ? await authenticate(event.req, ctx.options.auth) : undefined;
      done = ctx.registry.enter();
      return await handler(event, principal);
    } catch (error) {
      return errorResponse(error, ctx.options.logger);
    } finally {
      done?.();
    }
  };
}
