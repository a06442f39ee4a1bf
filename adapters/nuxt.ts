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

/** The part of a Nuxt instance the module touches. */
export interface NuxtLike {
  options: { vQueue?: VQueueNitroOptions | false; nitro: { modules?: unknown[] } };
}

/** The Nuxt module: adds the Nitro module (`v-queue/nitro`) to Nuxt's Nitro. */
export default function vQueueNuxt(inlineOptions: VQueueNitroOptions = {}, nuxt: NuxtLike): void {
  const fromConfig = nuxt.options.vQueue;
  if (fromConfig === false) return;
  (nuxt.options.nitro.modules ??= []).push(vQueue(defu(inlineOptions, fromConfig)));
}

vQueueNuxt.getMeta = (): Promise<{ name: string; configKey: string }> => Promise.resolve({ name: "v-queue", configKey: "vQueue" });
