/**
 * A Nuxt 4.3 app written from scratch (not the playground): the module added with no options, a
 * server plugin that starts a worker at boot (before the module's own plugin, before its queue
 * exists) with the auto-imported useVQueue, a server route that pushes. Built once, the
 * playground's installed nuxt linked in. Then the API is refused from outside (no users).
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp, ROOT, startApp, type HostApp, type RunningHost } from "./_host";

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
  const cwd = mkdtempSync(join(tmpdir(), "vq-nuxt-app-"));
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(cwd, path, ".."), { recursive: true });
    writeFileSync(join(cwd, path), text);
  }
  symlinkSync(join(ROOT, "playground/nuxt/node_modules"), join(cwd, "node_modules"), "dir");
  const app: HostApp = { dir: "nuxt", name: "nuxt app from scratch", build: ["nuxt", "build"], envPrefix: "NUXT_", cwd, ready: "/api/done" };
  let host: RunningHost;

  beforeAll(async () => {
    await buildApp(app);
    host = await startApp(app);
  }, 600_000);

  afterAll(async () => {
    if (host?.running()) await host.stop().catch(() => host.kill());
  });

  it("starts a worker from a server plugin at boot, before its queue exists; it processes what a route pushes later", async () => {
    expect(host.output()).not.toContain("No v-queue named");
    await new Promise((r) => setTimeout(r, 1000));
    expect((await fetch(`${host.url}/api/jobs`, { method: "POST" })).status).toBe(200);
    const deadline = Date.now() + 20_000;
    let done: string[] = [];
    while (done.length < 20 && Date.now() < deadline) {
      done = ((await (await fetch(`${host.url}/api/done`)).json()) as { done: string[] }).done;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(done.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `job-${i}`).sort());
  });

  it("does not serve the HTTP API without users", async () => {
    for (const path of ["/_queue/api/v1/queues", "/_queue/metrics"]) expect((await fetch(`${host.url}${path}`)).status).toBe(404);
    expect((await fetch(`${host.url}/_queue/api/v1/queues/jobs`, { method: "DELETE" })).status).toBe(404);
  });
});
