/**
 * The Worker the workerd tests run: the v-queue HTTP app on the durable-object driver (env.VQUEUE),
 * or on the memory driver when env.STORAGE is "memory" (that app is made at global scope, as
 * Nitro's cloudflare-module does: nothing may start a timer there). Basic auth when env.AUTH is
 * "user:password".
 */
import { createQueueHandler, type QueueHandler } from "../../runtime/index";
import memoryDriver from "../../adapters/drivers/memory";
import durableObjectDriver, { type DurableObjectNamespace } from "../../adapters/drivers/durable-object";

export { VQueueObject } from "../../adapters/cloudflare";

interface Env {
  VQUEUE?: DurableObjectNamespace;
  STORAGE?: string;
  AUTH?: string;
}

const atGlobalScope = createQueueHandler({ driver: memoryDriver(), auth: false });
let handler: QueueHandler | undefined;

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    if (env.STORAGE === "memory") return atGlobalScope.fetch(request);
    if (!handler) {
      const [username = "", password = ""] = (env.AUTH ?? "").split(":");
      const auth = env.AUTH ? { users: [{ username, password }] } : false;
      handler = createQueueHandler({ driver: durableObjectDriver({ namespace: env.VQUEUE! }), auth });
    }
    return handler.fetch(request);
  },
};
