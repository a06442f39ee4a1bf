/**
 * The Worker the workerd tests run: the v-queue HTTP app on the durable-object driver (env.VQUEUE),
 * or on the memory driver when env.STORAGE is "memory" (that app is made at global scope, as
 * Nitro's cloudflare-module does: nothing may start a timer there). Basic auth when env.AUTH is
 * "user:password"; env.LEASE_MS sets the driver's lockLeaseMs. With env.STORAGE "kv", the app is made on the KV binding env.KV: the answer
 * is the error that refuses it (500, its code and message as JSON). A POST to /__object/<name>/<method>
 * calls that method of the VQueueObject named <name> (see ./_rpc.ts): the driver tests' way in.
 */
import { createQueueHandler, type QueueHandler } from "../../runtime/index";
import memoryDriver from "../../adapters/drivers/memory";
import durableObjectDriver, { type DurableObjectNamespace } from "../../adapters/drivers/durable-object";
import { answerCall, RPC_PREFIX } from "./_rpc";

export { VQueueObject } from "../../adapters/cloudflare";

interface Env {
  VQUEUE?: DurableObjectNamespace;
  KV?: unknown;
  STORAGE?: string;
  AUTH?: string;
  LEASE_MS?: string;
}

const atGlobalScope = createQueueHandler({ driver: memoryDriver(), auth: false });
let handler: QueueHandler | undefined;

export default {
  fetch(request: Request, env: Env): Promise<Response> {
    if (new URL(request.url).pathname.startsWith(RPC_PREFIX)) {
      const namespace = env.VQUEUE!;
      return answerCall(request, (name) => namespace.get(namespace.idFromName(name)) as never);
    }
    if (env.STORAGE === "memory") return atGlobalScope.fetch(request);
    if (env.STORAGE === "kv") {
      try {
        createQueueHandler({ driver: env.KV as never });
        return Promise.resolve(new Response("made", { status: 200 }));
      } catch (error) {
        const { code, message } = error as { code?: string; message: string };
        return Promise.resolve(Response.json({ code, message }, { status: 500 }));
      }
    }
    if (!handler) {
      const [username = "", password = ""] = (env.AUTH ?? "").split(":");
      const auth = env.AUTH ? { users: [{ username, password }] } : false;
      handler = createQueueHandler({
        driver: durableObjectDriver({ namespace: env.VQUEUE!, ...(env.LEASE_MS ? { lockLeaseMs: Number(env.LEASE_MS) } : {}) }),
        auth,
      });
    }
    return handler.fetch(request);
  },
};
