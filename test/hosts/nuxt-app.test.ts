/**
 * A Nuxt 4.3 app written from scratch (not the playground): the module added with no options, a
 * server plugin that starts a worker at boot (before the module's own plugin, before its queue
 * exists) with the auto-imported useVQueue, a server route that pushes. Built once, the
 * playground's installed nuxt linked in. Then the API is refused from outside (no users).
 */
import { describe, expect, it } from "vitest";
import type { HostApp } from "./_host";
import { expectJobsDone, scratchApp, useRunningApp } from "./_scratch";

const files: Record<string, string> = {
  "package.json": JSON.stringify({ name: "my-nuxt-app", private: true, type: "module" }),
  "nuxt.config.ts": `export default defineNuxtConfig({ compatibilityDate: "2025-10-01", modules: ["v-queue/nuxt"], devtools: { enabled: false }, telemetry: false });\n`,
  "app/app.vue": `<template><div>app</div></template>\n`,
  "server/plugins/worker.ts": `export default defineNitroPlugin(() => {
  const done = ((globalThis as { done?: string[] }).done = []);
  useVQueue().worker("jobs", "billing", async (m) => {
    done.push(typeof m.data === "string" ? m.data : "bytes");
  }, { pollTimeoutMs: 500 });
});
`,
  "server/api/jobs.post.ts": `export default defineEventHandler(() => useVQueue().push("jobs", Array.from({ length: 20 }, (_, i) => \`job-\${i}\`)));\n`,
  "server/api/done.get.ts": `export default defineEventHandler(() => ({ done: (globalThis as { done?: string[] }).done ?? [] }));\n`,
};

describe("a Nuxt app written from scratch, with the module added as the README says", () => {
  const app: HostApp = { dir: "nuxt", name: "nuxt app from scratch", build: ["nuxt", "build"], envPrefix: "NUXT_", cwd: scratchApp("nuxt", files), ready: "/api/done" };
  const running = useRunningApp(app);

  it("starts a worker from a server plugin at boot, before its queue exists; it processes what a route pushes later", async () => {
    const host = running();
    expect(host.output()).not.toContain("No v-queue named");
    await new Promise((r) => setTimeout(r, 1000));
    expect((await fetch(`${host.url}/api/jobs`, { method: "POST" })).status).toBe(200);
    await expectJobsDone(host, "/api/done", 20);
  });

  it("does not serve the HTTP API without users", async () => {
    const host = running();
    for (const path of ["/_queue/api/v1/queues", "/_queue/metrics"]) expect((await fetch(`${host.url}${path}`)).status).toBe(404);
    expect((await fetch(`${host.url}/_queue/api/v1/queues/jobs`, { method: "DELETE" })).status).toBe(404);
  });
});
