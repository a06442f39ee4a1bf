/**
 * Miniflare for the tests: started from the tool cache (startMiniflare, also for the built hosts
 * of test/hosts/_workerd.ts), and the workerd tests' Worker (./_worker.ts, bundled) with the
 * VQueueObject class bound as VQUEUE, its Durable Objects kept in `persist` when given (a restart
 * keeps them).
 */
import type { Miniflare, MiniflareOptions, MiniflarePackage } from "../helpers/tool-types";
import { importTool } from "../helpers/tools";
import { resolve } from "pathe";
import { bundleWorker } from "./_bundle";

export const WORKER_ENTRY = resolve(import.meta.dirname, "_worker.ts");
/** The compatibility date the tests run workerd with (RPC to Durable Objects needs 2024-04-03 or later). */
export const COMPATIBILITY_DATE = "2025-01-01";

export interface WorkerOptions {
  /** Directory that keeps the Durable Objects' storage across Miniflare instances. */
  persist?: string;
  /** Worker bindings (STORAGE, AUTH: see _worker.ts). */
  bindings?: Record<string, string>;
  /** Serve real HTTP on a loopback port too. */
  http?: boolean;
}

/** Miniflare (installed on first use), once workerd runs. */
export async function startMiniflare(options: MiniflareOptions): Promise<Miniflare> {
  const { Miniflare } = await importTool<MiniflarePackage>("miniflare");
  const mf = new Miniflare(options);
  await mf.ready;
  return mf;
}

export async function startWorker(options: WorkerOptions = {}): Promise<Miniflare> {
  const script = await bundleWorker(WORKER_ENTRY);
  return startMiniflare({
    // The modules listed, not found by Miniflare: the bundle keeps a dynamic import("@opentelemetry/api") it cannot follow (it fails softly at run time).
    modules: [{ type: "ESModule", path: "worker.mjs", contents: script }],
    compatibilityDate: COMPATIBILITY_DATE,
    durableObjects: { VQUEUE: "VQueueObject" },
    ...(options.persist ? { durableObjectsPersist: options.persist } : {}),
    kvNamespaces: ["KV"],
    bindings: options.bindings ?? {},
    ...(options.http ? { host: "127.0.0.1", port: 0 } : {}),
  });
}

/**
 * Two Workers, "a" and "b", each its own isolate with its own app (registry, writers, consumers),
 * on one Durable Object namespace (the class lives in "a"; "b" binds it by scriptName): two
 * instances of a deployed Worker, as Cloudflare runs many.
 */
export async function startTwoWorkers(bindings: Record<string, string> = {}): Promise<Miniflare> {
  const script = await bundleWorker(WORKER_ENTRY);
  const modules = [{ type: "ESModule" as const, path: "worker.mjs", contents: script }];
  return startMiniflare({
    workers: [
      { name: "a", modules, compatibilityDate: COMPATIBILITY_DATE, durableObjects: { VQUEUE: "VQueueObject" }, bindings },
      { name: "b", modules, compatibilityDate: COMPATIBILITY_DATE, durableObjects: { VQUEUE: { className: "VQueueObject", scriptName: "a" } }, bindings },
    ],
  });
}
