/**
 * A Nitro 3 app written from scratch (not the playground), as a new user writes one: the
 * module added with no options, a plugin that starts a worker at boot (before the module's own
 * plugin, and before its queue exists), routes that push from server code. Built once; v-queue
 * installed from the packed tarball beside the playground's locked nitro. Then the API is refused from outside (no users),
 * a route's bad push answers the API's status, and a misspelt option stops the build.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import { ROOT, type HostApp } from "./_host";
import { expectJobsDone, expectLeanInstall, installApp, scratchApp, useRunningApp } from "./_scratch";
import { sleep } from "../helpers/sleep";

const run = promisify(execFile);
const PACKAGE = JSON.stringify({ name: "my-app", private: true, type: "module" });

const config = (options = "") => `import { defineNitroConfig } from "nitro/config";
import vQueue from "v-queue/nitro";

export default defineNitroConfig({
  compatibilityDate: "2025-10-01",
  modules: [vQueue(${options})],
});
`;

const files = {
  "package.json": PACKAGE,
  "nitro.config.ts": config(),
  // Runs before the module's plugin (Nitro puts the app's first); "jobs" does not exist yet.
  "plugins/worker.ts": `import { defineNitroPlugin } from "nitro/runtime";
import { useVQueue } from "v-queue/nitro";

export default defineNitroPlugin(() => {
  const done = ((globalThis as { done?: string[] }).done = []);
  useVQueue().worker("jobs", "billing", async (m) => {
    done.push(typeof m.data === "string" ? m.data : "bytes");
  }, { pollTimeoutMs: 500 });
});
`,
  "routes/jobs.post.ts": `import { defineHandler } from "nitro/h3";
import { useVQueue } from "v-queue/nitro";

export default defineHandler(async (event) => {
  const count = Number(new URL(event.req.url).searchParams.get("count") ?? 1);
  return useVQueue().push("jobs", Array.from({ length: count }, (_, i) => \`job-\${i}\`));
});
`,
  "routes/done.get.ts": `import { defineHandler } from "nitro/h3";

export default defineHandler(() => ({ done: (globalThis as { done?: string[] }).done ?? [] }));
`,
  "routes/bad.post.ts": `import { defineHandler } from "nitro/h3";
import { useVQueue } from "v-queue/nitro";

export default defineHandler(() => useVQueue().push("not a name", "x"));
`,
};

describe("a Nitro app written from scratch, with the module added as the README says", () => {
  const app: HostApp = {
    dir: "nitro",
    name: "nitro app from scratch",
    build: ["nitro", "build"],
    envPrefix: "NITRO_",
    cwd: scratchApp("nitro", files),
    ready: "/done",
    install: () => installApp("nitro"),
  };
  const running = useRunningApp(app);

  it("has v-queue from the packed tarball, which brings one h3 and none of the CLI's packages", () => {
    expectLeanInstall("nitro");
  });

  it("starts a worker from a plugin at boot, before its queue exists; it processes what a route pushes later", async () => {
    const host = running();
    expect(host.output()).not.toContain("No v-queue named");
    // The worker has been waiting for "jobs" for a while.
    await sleep(1000);
    const pushed = await fetch(`${host.url}/jobs?count=20`, { method: "POST" });
    expect(pushed.status).toBe(200);
    expect(await pushed.json()).toMatchObject({ queue: "jobs", count: 20 });
    await expectJobsDone(host, "/done", 20);
  });

  it("does not serve the HTTP API, the dashboard or the metrics without users (said at start)", async () => {
    const host = running();
    for (const path of ["/_queue/api/v1/queues", "/_queue/", "/_queue/metrics", "/_queue/health"]) expect((await fetch(`${host.url}${path}`)).status).toBe(404);
    const deleted = await fetch(`${host.url}/_queue/api/v1/queues/jobs`, { method: "DELETE" });
    expect(deleted.status).toBe(404);
    expect(host.output()).toContain("are not served: no users configured");
  });

  it("a route whose push is refused answers the API's status (400), not a 500", async () => {
    const res = await fetch(`${running().url}/bad`, { method: "POST" });
    expect(res.status).toBe(400);
  });

  // A type check and a build are CPU work: 2 minutes for a machine that runs other files beside it.
  it("useVQueue is typed in the app (tsc): a wrong use fails, the docs' worker plugin and the README's route pass", { timeout: 120_000 }, async () => {
    const page = readFileSync(join(ROOT, "docs/nitro-nuxt.md"), "utf8");
    const plugin = /^\/\/ plugins\/billing\.ts \(Nitro v3\)\n([\s\S]*?)^```$/m.exec(page)?.[1];
    expect(plugin).toBeDefined();
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const route = /^\/\/ routes\/api\/orders\.post\.ts:.*\n([\s\S]*?)^```$/m.exec(readme)?.[1];
    expect(route).toBeDefined();
    const cwd = scratchApp("nitro", {
      "package.json": PACKAGE,
      "tsconfig.json": JSON.stringify({
        compilerOptions: { strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", noEmit: true, skipLibCheck: true, types: [] },
        include: ["*.ts"],
      }),
      "billing.ts": plugin!,
      "orders.ts": route!,
      "wrong.ts": `import { useVQueue } from "v-queue/nitro";
// @ts-expect-error: an instance, not a number (an unused directive fails tsc if useVQueue were any)
export const n: number = useVQueue();
`,
    });
    await expect(run(join(ROOT, "node_modules/.bin/tsc"), ["-p", cwd])).resolves.toBeDefined();
  });

  it("a misspelt module option stops the build, naming it", { timeout: 120_000 }, async () => {
    const cwd = scratchApp("nitro", { "package.json": PACKAGE, "nitro.config.ts": config(`{ durabilty: "none" }`) });
    const failed = await run("npx", ["nitro", "build"], { cwd, env: { ...process.env, NODE_ENV: "production" }, maxBuffer: 64 << 20 }).then(
      () => undefined,
      (error: { stdout: string; stderr: string }) => error.stdout + error.stderr,
    );
    expect(failed).toContain('Unknown key "durabilty" (did you mean "durability"?)');
  });
});
