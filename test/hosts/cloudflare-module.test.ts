/**
 * Nitro's `cloudflare-module` preset: playground/nitro, with the wrangler config of the README,
 * built with it and run in workerd through Miniflare (the npm `miniflare` package). Storage
 * `memory:` (one isolate's life: there is no file system), set by a var, which `nodejs_compat`
 * puts in `process.env`. No signals, no Node process series. Slow (a Nitro build).
 */
import { existsSync } from "node:fs";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appDir, buildApp, type RunningHost } from "./_host";
import { describeHost } from "./_suite";
import { presetApp } from "./_preset";
import { startWorkerd } from "./_miniflare";

// nodejs_compat here also makes Nitro leave node:* to workerd (else unenv's stubs are bundled).
const WRANGLER = {
  name: "v-queue-playground",
  main: ".output/server/index.mjs",
  compatibility_date: "2025-10-01",
  compatibility_flags: ["nodejs_compat"],
  vars: { NITRO_V_QUEUE_DEFAULT_STORAGE: "memory:" },
};
const app = presetApp("cloudflare-module", { noMinify: true, files: { "wrangler.json": JSON.stringify(WRANGLER, null, 2) } });
const start = startWorkerd();
describeHost(app, { start, runsIn: "workerd via Miniflare", processSeries: false, clientAbort: false, signals: false });

// The same build (made by the suite above, unless filtered out), run without a storage setting: the module's default, the fs driver.
describe("cloudflare-module without a storage setting", () => {
  let host: RunningHost;
  beforeAll(async () => {
    if (!existsSync(join(appDir(app), ".output/server/index.mjs"))) await buildApp(app);
    host = await startWorkerd({ vars: {}, healthy: false })(app);
  }, 600_000);
  afterAll(() => host?.kill());

  it("refuses the fs driver at start with a clear error, and every /_queue request fails (no writes to a stub file system)", async () => {
    const res = await fetch(`${host.url}/_queue/api/v1/queues/q/messages`, { method: "POST", body: "x", headers: { authorization: `Basic ${btoa("admin:admin-secret")}` } });
    expect(res.status).toBe(500);
    expect((await fetch(`${host.url}/_queue/health`)).status).toBe(500);
    // The app's own routes still answer.
    expect((await fetch(`${host.url}/`)).status).toBe(200);
    expect(host.output()).toContain("The fs driver cannot run in Cloudflare Workers");
  });
});
