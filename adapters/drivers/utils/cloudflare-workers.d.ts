/**
 * The little of workerd's `cloudflare:workers` module that v-queue uses (the Durable Object base
 * class, for RPC), declared here so that the project type-checks without @cloudflare/workers-types.
 * The module exists only inside workerd: bundlers for Workers keep the import as it is.
 */
declare module "cloudflare:workers" {
  export abstract class DurableObject<Env = unknown> {
    protected ctx: import("./durable-object-types").DurableObjectState;
    protected env: Env;
    constructor(ctx: import("./durable-object-types").DurableObjectState, env: Env);
  }
}
