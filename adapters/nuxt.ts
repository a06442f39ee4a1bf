/**
 * `v-queue/nuxt`: the v-queue Nitro module in a Nuxt app (Nuxt 4.3.x on Node 20; Nuxt 4.4+
 * needs Node 22). A plain Nuxt module, so that v-queue needs no `@nuxt/kit`:
 *
 * ```ts
 * // nuxt.config.ts
 * export default defineNuxtConfig({ modules: [["v-queue/nuxt", { prefix: "/_queue" }]] });
 * ```
 *
 * Options also come from the `vQueue` key of the Nuxt config (`vQueue: false` disables it), and
 * at run time from the runtime config: `NUXT_V_QUEUE_DEFAULT_DIR`, `NUXT_V_QUEUE_DEFAULT_AUTH_USERS`.
 */
import { defu } from "defu";
import vQueue, { type VQueueNitroOptions } from "./nitro";

export type { VQueueNitroOptions as VQueueNuxtOptions } from "./nitro";

/** The part of a Nuxt instance the module touches (`vQueue` unknown: its type is this module's, see below). */
export interface NuxtLike {
  options: { vQueue?: unknown; nitro: { modules?: unknown[] } };
}

/**
 * Nuxt's `NuxtModule` shape (`defineNuxtModule`'s result) without `@nuxt/kit`: `nuxi prepare`
 * types the `vQueue` key of `nuxt.config` (and the module's inline options) from the options
 * this call takes (`NuxtModule<infer O>` in `.nuxt/types/modules.d.ts`).
 */
export interface VQueueNuxtModule {
  (this: void, inlineOptions: VQueueNitroOptions, nuxt: NuxtLike): void;
  getMeta: () => Promise<{ name: string; configKey: string }>;
}

/** The Nuxt module: adds the Nitro module (`v-queue/nitro`) to Nuxt's Nitro. */
const vQueueNuxt: VQueueNuxtModule = (inlineOptions = {}, nuxt) => {
  const fromConfig = nuxt.options.vQueue as VQueueNitroOptions | false | undefined;
  if (fromConfig === false) return;
  (nuxt.options.nitro.modules ??= []).push(vQueue(defu(inlineOptions, fromConfig)));
};
vQueueNuxt.getMeta = () => Promise.resolve({ name: "v-queue", configKey: "vQueue" });

export default vQueueNuxt;
