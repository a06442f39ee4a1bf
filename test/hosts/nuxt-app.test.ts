/**
 * A Nuxt 4.3 app written from scratch (not the playground): the module added with no options, a
 * server plugin that starts a worker at boot (before the module's own plugin, before its queue
 * exists) with the auto-imported useVQueue, a server route that pushes. Built once; v-queue
 * installed from the packed tarball beside the playground's locked nuxt. Then the API is refused from outside (no users).
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { join } from "pathe";
import { beforeAll, describe, expect, it } from "vitest";
import { ROOT, type HostApp } from "./_host";
import { expectJobsDone, expectLeanInstall, installApp, scratchApp, useRunningApp } from "./_scratch";
import { sleep } from "../helpers/sleep";

const run = promisify(execFile);

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
  const app: HostApp = {
    dir: "nuxt",
    name: "nuxt app from scratch",
    build: ["nuxt", "build"],
    envPrefix: "NUXT_",
    cwd: scratchApp("nuxt", files),
    ready: "/api/done",
    install: () => installApp("nuxt"),
  };
  const running = useRunningApp(app);

  it("has v-queue from the packed tarball, which brings one h3 and none of the CLI's packages", () => {
    expectLeanInstall("nuxt");
  });

  it("starts a worker from a server plugin at boot, before its queue exists; it processes what a route pushes later", async () => {
    const host = running();
    expect(host.output()).not.toContain("No v-queue named");
    await sleep(1000);
    expect((await fetch(`${host.url}/api/jobs`, { method: "POST" })).status).toBe(200);
    await expectJobsDone(host, "/api/done", 20);
  });

  it("does not serve the HTTP API without users", async () => {
    const host = running();
    for (const path of ["/_queue/api/v1/queues", "/_queue/metrics"]) expect((await fetch(`${host.url}${path}`)).status).toBe(404);
    expect((await fetch(`${host.url}/_queue/api/v1/queues/jobs`, { method: "DELETE" })).status).toBe(404);
  });
});

describe("the module's types in a Nuxt app (nuxi prepare, then tsc on the generated tsconfigs)", () => {
  // An unused @ts-expect-error fails tsc: each line below fails the check if its value were `any`.
  const cwd = scratchApp("nuxt", {
    "package.json": files["package.json"]!,
    "nuxt.config.ts": `export default defineNuxtConfig({ compatibilityDate: "2025-10-01", modules: ["v-queue/nuxt"], vQueue: { prefix: "/q" }, devtools: { enabled: false }, telemetry: false });
// Never loaded as config (defineNuxtConfig returns its argument): a wrongly typed module key.
defineNuxtConfig({
  // @ts-expect-error: prefix is a string
  vQueue: { prefix: 42 },
});
`,
    "app/app.vue": files["app/app.vue"]!,
    "server/api/n.get.ts": `export default defineEventHandler(() => {
  // @ts-expect-error: useVQueue() is the instance, not a number
  const n: number = useVQueue();
  return n;
});
`,
  });
  const tsc = (project: string) =>
    run(join(ROOT, "node_modules/.bin/tsc"), ["--noEmit", "-p", project], { cwd }).then(
      () => "",
      (error: { stdout: string }) => error.stdout,
    );
  beforeAll(async () => {
    await installApp("nuxt");
    await run("npx", ["nuxi", "prepare"], { cwd, env: { ...process.env, NUXT_TELEMETRY_DISABLED: "1" }, maxBuffer: 64 << 20 });
  }, 600_000);

  // A type check of a Nuxt app is CPU work: 2 minutes for a machine that runs other files beside it.
  it("the auto-imported useVQueue is typed in server code", { timeout: 120_000 }, async () => {
    expect(await tsc(".nuxt/tsconfig.server.json")).toBe("");
  });

  it("the vQueue key of nuxt.config is typed by the module's options", { timeout: 120_000 }, async () => {
    expect(await tsc(".nuxt/tsconfig.node.json")).toBe("");
  });
});
