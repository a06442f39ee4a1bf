/**
 * For a Worker (workerd): the Durable Object class that holds the queues (export it from the
 * Worker's entry and bind it in the wrangler config), and the driver that talks to it. Imports
 * `cloudflare:workers`, so this entry loads only in workerd; the driver alone
 * (`v-queue/drivers/durable-object`) loads anywhere. See docs/runtimes.md#cloudflare-workers.
 */
export { VQueueObject } from "./drivers/utils/queue-object";
export { default as durableObjectDriver, type DurableObjectDriverOptions, type DurableObjectNamespace } from "./drivers/durable-object";
