/**
 * The Nitro module on Cloudflare Workers: the `VQueueObject` class exported from the built
 * Worker's entry (build time), and the Worker's env found at run time, for a
 * `durable-object:BINDING` storage.
 */
import type { WorkerEnv } from "./storage";
import { inWorkerd } from "../runtime/options";

/** Nitro's presets whose output is one Worker whose entry may export Durable Object classes (Pages cannot). */
const WORKER_PRESETS = new Set(["cloudflare-module", "cloudflare-durable"]);

const ENTRY_ID = "#v-queue/cloudflare-entry";

/** The part of the Nitro options this file reads and changes (both generations). */
export interface NitroEntryOptions {
  preset?: string;
  dev?: boolean;
  entry?: string | null;
  virtual?: Record<string, string | (() => string | Promise<string>)>;
}

/**
 * Makes the build's entry a module that re-exports the preset's entry and adds `VQueueObject`,
 * on the Worker presets only (whatever the storage: `NITRO_V_QUEUE_DEFAULT_STORAGE` may name a
 * Durable Object binding at run time, after the build). Why this way: workerd finds a Durable
 * Object class only among the entry's exports, and Nitro 3.0.0 (nitropack 2 alike) has no option
 * or hook to add one; `entry` is a plain option every builder reads (rollup, rolldown, vite), and
 * these presets bundle everything (`noExternals`), so a virtual entry wrapping the resolved
 * original changes nothing else. `export *` keeps the original's own classes (cloudflare-durable's).
 * Returns whether it wrapped the entry.
 */
export function exportQueueObject(options: NitroEntryOptions): boolean {
  if (options.dev || !options.preset || !WORKER_PRESETS.has(options.preset) || !options.entry) return false;
  if (options.entry === ENTRY_ID) return true; // a second instance of the module
  const original = JSON.stringify(options.entry);
  (options.virtual ??= {})[ENTRY_ID] = [
    `export * from ${original};`,
    `export { default } from ${original};`,
    `export { VQueueObject } from "v-queue/cloudflare";`,
  ].join("\n");
  options.entry = ENTRY_ID;
  return true;
}

/**
 * The Worker's env, where Nitro's Cloudflare presets put it: `globalThis.__env__`, set before
 * each event (fetch, scheduled, queue...) reaches the app, so known from the first request on
 * (nitropack 2 does the same; under `nitro dev`'s Cloudflare emulation it is a promise first).
 * Undefined at global scope, before any event, and outside Workers.
 */
export async function workerEnv(): Promise<WorkerEnv | undefined> {
  const env = await (globalThis as { __env__?: WorkerEnv | Promise<WorkerEnv> }).__env__;
  return env && typeof env === "object" ? env : undefined;
}

/**
 * In workerd before the Worker's first event (Nitro makes the app at global scope, and a plugin
 * may call `useVQueue()` there): the env is not known yet. Opening now would fail, and that
 * failure be kept for every later request: the caller is refused instead, and may try again.
 */
export function workerEnvPending(): boolean {
  return inWorkerd() && (globalThis as { __env__?: unknown }).__env__ === undefined;
}
