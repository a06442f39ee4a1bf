/**
 * Nitro's `cloudflare-module` preset: playground/nitro, with the wrangler config of docs/nitro-nuxt.md,
 * built with it once and run in workerd through Miniflare (the npm `miniflare` package): the
 * host suite on Durable Objects (storage `durable-object:VQUEUE`, the module's exported
 * VQueueObject bound as VQUEUE, kept in a temporary dir), a restart on the same objects, and
 * the suite on `memory:` (one isolate's life: there is no file system). The storage is a var,
 * which `nodejs_compat` puts in `process.env`. No signals, no Node process series. Slow (a Nitro build).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "pathe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, VQueueClientError } from "v-queue/client";
import { buildApp, type RunningHost } from "./_host";
import { describeHost } from "./_suite";
import { presetApp } from "./_preset";
import { startWorkerd, type WranglerConfig } from "./_workerd";
import { sleep } from "../helpers/sleep";

// nodejs_compat here also makes Nitro leave node:* to workerd (else unenv's stubs are bundled).
const MEMORY: WranglerConfig = {
  name: "v-queue-playground",
  main: ".output/server/index.mjs",
  compatibility_date: "2025-10-01",
  compatibility_flags: ["nodejs_compat"],
  vars: { NITRO_V_QUEUE_DEFAULT_STORAGE: "memory:" },
};
// docs/nitro-nuxt.md's: the class the module exports from the entry, bound as VQUEUE, SQLite-backed.
const DURABLE: WranglerConfig = {
  ...MEMORY,
  vars: { NITRO_V_QUEUE_DEFAULT_STORAGE: "durable-object:VQUEUE" },
  durable_objects: { bindings: [{ name: "VQUEUE", class_name: "VQueueObject" }] },
  migrations: [{ tag: "v1", new_sqlite_classes: ["VQueueObject"] }],
};
const ADMIN = { username: "admin", password: "admin-secret" };

// One build (the storage is chosen at run time), three ways to run it.
const app = presetApp("cloudflare-module", { noMinify: true, files: { "wrangler.json": JSON.stringify(DURABLE, null, 2) } });
describeHost(app, { start: startWorkerd(), runsIn: "workerd via Miniflare, on Durable Objects", processSeries: false, clientAbort: false, signals: false });
describeHost(app, {
  start: startWorkerd({ config: MEMORY }),
  runsIn: "workerd via Miniflare, in memory",
  processSeries: false,
  clientAbort: false,
  signals: false,
});

describe("cloudflare-module on Durable Objects, workerd stopped and started again on the same storage", () => {
  const persist = mkdtempSync(join(tmpdir(), "vq-host-do-restart-"));
  const hosts: RunningHost[] = [];
  beforeAll(async () => {
    await buildApp(app);
  }, 600_000);
  afterAll(async () => {
    for (const host of hosts) await host.stop().catch(() => host.kill());
    rmSync(persist, { recursive: true, force: true });
  });

  it("keeps the messages and the consumer's position; the first request after the restart is the app's own route (useVQueue)", async () => {
    const first = await startWorkerd()(app, persist);
    hosts.push(first);
    const before = createClient({ baseURL: `${first.url}/_queue`, auth: ADMIN });
    const sent = Array.from({ length: 10 }, (_, i) => `m${i}`);
    await before.produce("restart", sent);
    const read = await before.consume("restart", "c", { maxMessages: 4 });
    expect(read.messages.map((m) => m.data)).toEqual(sent.slice(0, 4));
    await before.commit("restart", "c", read.cursor);
    await first.stop();

    // Not waiting for /_queue/health: the queues open at the first request, here one to the app's route.
    const second = await startWorkerd({ healthy: false })(app, persist);
    hosts.push(second);
    const order = await fetch(`${second.url}/api/orders`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ item: "book" }),
    });
    expect(order.status).toBe(200);
    expect(await order.json()).toMatchObject({ queued: true, position: { part: 0, seq: 1 } });

    const after = createClient({ baseURL: `${second.url}/_queue`, auth: ADMIN });
    // The stopped isolate's locks stay in the objects until their lease (3 s) runs out: 409 until then.
    const { messages, cursor } = await untilUnlocked(() => after.consume("restart", "c", { maxMessages: 100 }));
    expect(messages.map((m) => m.data)).toEqual(sent.slice(4));
    await after.commit("restart", "c", cursor);
    await untilUnlocked(() => after.produce("restart", "after-restart"));
    const last = await after.consume("restart", "c");
    expect(last.messages.map((m) => m.data)).toEqual(["after-restart"]);
    await after.commit("restart", "c", last.cursor);
    expect((await after.consumers("restart")).consumers.find((c) => c.name === "c")).toMatchObject({ lag: 0 });
  }, 60_000);
});

// The same build (made once per file), run without a storage setting: the module's default, the fs driver.
describe("cloudflare-module without a storage setting", () => {
  let host: RunningHost;
  beforeAll(async () => {
    await buildApp(app);
    host = await startWorkerd({ config: MEMORY, vars: {}, healthy: false })(app);
  }, 600_000);
  afterAll(() => host?.kill());

  it("refuses the fs driver at start with a clear error, and every /_queue request fails (no writes to a stub file system)", async () => {
    const res = await fetch(`${host.url}/_queue/api/v1/queues/q/messages`, {
      method: "POST",
      body: "x",
      headers: { authorization: `Basic ${btoa("admin:admin-secret")}` },
    });
    expect(res.status).toBe(500);
    expect((await fetch(`${host.url}/_queue/health`)).status).toBe(500);
    // The app's own routes still answer.
    expect((await fetch(`${host.url}/`)).status).toBe(200);
    expect(host.output()).toContain("The fs driver cannot run in Cloudflare Workers");
  });
});

describe("cloudflare-module with `durable-object:` storage and a wrong binding", () => {
  let host: RunningHost;
  beforeAll(async () => {
    await buildApp(app);
    host = await startWorkerd({ vars: { NITRO_V_QUEUE_DEFAULT_STORAGE: "durable-object:QUEUES" }, healthy: false })(app);
  }, 600_000);
  afterAll(() => host?.kill());

  it("answers 500 on /_queue and logs which binding is missing and which namespaces there are", async () => {
    expect((await fetch(`${host.url}/_queue/health`)).status).toBe(500);
    expect(host.output()).toContain('the Worker has no binding "QUEUES"');
    expect(host.output()).toContain("Durable Object namespaces bound now: VQUEUE");
  });
});

/** Retries `run` while it answers 409 (a lock a stopped isolate left), for 10 s at most. */
async function untilUnlocked<T>(run: () => Promise<T>): Promise<T> {
  for (const until = Date.now() + 10_000; ;) {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof VQueueClientError && error.status === 409) || Date.now() > until) throw error;
      await sleep(200);
    }
  }
}
