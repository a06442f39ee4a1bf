/**
 * The same checks against each host: the API through the client (`v-queue/client`, the built
 * package), the app's own route that pushes from server code, and a clean shutdown. A host
 * that lacks something (no Node process series, no signals) says so in its `SuiteOptions`.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, isAbortError, VQueueClientError, type VQueueClient } from "v-queue/client";
import { appName, buildApp, lockFiles, startApp, startLabel, type HostApp, type RunningHost } from "./_host";
import { HAS_CHROMIUM, launch, openPage } from "../browser/_dashboard";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";

const ADMIN = { username: "admin", password: "admin-secret" };
const READER = { username: "reader", password: "reader-secret" };

export interface SuiteOptions {
  /** Runs the built app (on `dataDir` when given): default `startApp` (its start command as a child process). */
  start?: (app: HostApp, dataDir?: string) => Promise<RunningHost>;
  /** How it runs, for the title: default the start command. */
  runsIn?: string;
  /** `/metrics` has the Node process series (memory, CPU). @default true */
  processSeries?: boolean;
  /** ... and `process_open_fds` (read from /proc/self, which Deno refuses without --allow-all). @default processSeries */
  openFds?: boolean;
  /** Opens the dashboard in Chromium (when installed); else only its page is fetched. @default true */
  chromium?: boolean;
  /**
   * The host tells the app when a client goes away (the request's signal aborts). Not workerd under
   * Miniflare: a request's signal never aborts there, even with `enable_request_signal`. @default true
   */
  clientAbort?: boolean;
  /** A process that SIGTERM stops (and SIGKILL kills), and a data dir whose lock files it removes (or leaves). @default true */
  signals?: boolean;
  /**
   * How it exits on SIGTERM: 0 when the host handles the signal (Nitro's node preset), or
   * "SIGTERM" (v-queue closes its queues, then raises the signal again: nobody else listens).
   * @default 0
   */
  sigtermExit?: number | NodeJS.Signals;
}

export function describeHost(app: HostApp, options: SuiteOptions = {}): void {
  const {
    start = startApp,
    runsIn = startLabel(app),
    processSeries = true,
    openFds = processSeries,
    chromium = true,
    clientAbort = true,
    signals = true,
    sigtermExit = 0,
  } = options;
  const name = appName(app);
  describe(`v-queue mounted in the ${name} playground (built, ${runsIn})`, () => {
    let host: RunningHost;
    let client: VQueueClient;

    beforeAll(async () => {
      const timings = await buildApp(app);
      const started = performance.now();
      host = await start(app);
      console.log(`[hosts] ${name}: install ${ms(timings.install)}, build ${ms(timings.build)}, start ${ms(performance.now() - started)}`);
      client = createClient({ baseURL: `${host.url}/_queue`, auth: ADMIN });
    }, 600_000);

    afterAll(async () => {
      if (host?.running()) await host.stop().catch(() => host.kill());
    });

    it("answers /health and needs credentials for the API (401, then 403 for a read-only user)", async () => {
      expect(await client.health()).toMatchObject({ status: "ok" });
      const anonymous = createClient({ baseURL: `${host.url}/_queue` });
      await expect(anonymous.queues()).rejects.toMatchObject({ status: 401, code: "E_AUTH" });
      const wrong = createClient({ baseURL: `${host.url}/_queue`, auth: { ...ADMIN, password: "nope" } });
      await expect(wrong.queues()).rejects.toMatchObject({ status: 401, code: "E_AUTH" });
      const reader = createClient({ baseURL: `${host.url}/_queue`, auth: READER });
      await expect(reader.produce("auth", "x")).rejects.toMatchObject({ status: 403, code: "E_FORBIDDEN" });
      await client.produce("auth", "x");
      expect((await reader.consume("auth", "r")).messages.map((m) => m.data)).toEqual(["x"]);
    });

    it(`serves <prefix>/metrics behind auth${processSeries ? `, with the Node process series${openFds ? "" : " (no process_open_fds)"}` : ""}`, async () => {
      expect((await fetch(`${host.url}/_queue/metrics`)).status).toBe(401);
      const res = await fetch(`${host.url}/_queue/metrics`, { headers: { authorization: `Basic ${btoa(`${ADMIN.username}:${ADMIN.password}`)}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
      const text = await res.text();
      if (processSeries) expect(text).toMatch(/^process_resident_memory_bytes \d+$/m);
      if (openFds) expect(text).toMatch(/^process_open_fds \d+$/m);
      expect(text).toContain('vqueue_http_requests_total{route="/api/v1/queues/:queue/messages",method="POST",status="201"} 1');
    });

    it("produces, and a long poll returns as soon as a message is pushed", async () => {
      await client.produce("poll", "first");
      const first = await client.consume("poll", "c");
      await client.commit("poll", "c", first.cursor);

      const start = performance.now();
      const polling = client.consume("poll", "c", { timeoutMs: 20_000, maxMessages: 10 });
      await sleep(300);
      await client.produce("poll", ["second", { n: 2 }]);
      const { messages } = await polling;
      const took = performance.now() - start;
      expect(messages.map((m) => m.data)).toEqual(["second", '{"n":2}']);
      // It waited for the produce (a sleep cannot end early), and the produce, not the timeout, ended it.
      expect(took).toBeGreaterThanOrEqual(250);
      expectEndedEarly(start, 20_000);
    });

    it.runIf(clientAbort)("sees a client abort: the consumer is free at once and no message is lost", async () => {
      await client.produce("abort", "seed");
      await client.commit("abort", "c", (await client.consume("abort", "c")).cursor);

      const controller = new AbortController();
      const aborted = client.consume("abort", "c", { timeoutMs: 30_000, signal: controller.signal });
      await sleep(300);
      controller.abort();
      await expect(aborted).rejects.toSatisfy(isAbortError);
      await sleep(300);

      // If the server had missed the abort, its poll would still hold the consumer and would
      // take this message for a client that is gone; the next consume would then wait 30 s.
      await client.produce("abort", "after-abort");
      const start = performance.now();
      const { messages, cursor } = await client.consume("abort", "c", { timeoutMs: WAKE_TIMEOUT_MS });
      expect(messages.map((m) => m.data)).toEqual(["after-abort"]);
      expectEndedEarly(start, 30_000);
      await client.commit("abort", "c", cursor);
    });

    it("commits: the position is saved, nothing is handed out twice", async () => {
      await client.produce("commit", ["a", "b", "c"]);
      const batch = await client.consume("commit", "c", { maxMessages: 2 });
      expect(batch.messages.map((m) => m.data)).toEqual(["a", "b"]);
      expect(await client.commit("commit", "c", batch.cursor)).toMatchObject({ queue: "commit", consumer: "c" });
      const { consumers } = await client.consumers("commit");
      expect(consumers.find((c) => c.name === "c")).toMatchObject({ count_popped: 2, lag: 1 });
      const rest = await client.consume("commit", "c", { maxMessages: 10 });
      expect(rest.messages.map((m) => m.data)).toEqual(["c"]);
    });

    it("leases from a shared consumer (a long poll woken by a push) and acks: each message once, none back", async () => {
      await client.produce("jobs", "j0");
      const [seed] = await client.lease("jobs", "workers");
      expect(await client.ack("jobs", "workers", seed!.lease)).toEqual({ acked: 1, errors: [] });
      const polling = client.lease("jobs", "workers", { max: 10, timeoutMs: 20_000 });
      await sleep(300);
      await client.produce("jobs", ["j1", "j2", "j3"]);
      const leased = await polling;
      expect(leased.map((m) => m.data)).toEqual(["j1", "j2", "j3"]);
      // A host that takes the request's end for a client gone would have given them back (nacked).
      await sleep(200);
      expect(await client.lease("jobs", "workers", { max: 10 })).toEqual([]);
      expect(
        await client.ack(
          "jobs",
          "workers",
          leased.map((m) => m.lease),
        ),
      ).toEqual({ acked: 3, errors: [] });
      expect(await client.lease("jobs", "workers", { max: 10, timeoutMs: 300 })).toEqual([]);
    });

    it("round-trips a 5 MiB binary message byte for byte (binary batches both ways)", async () => {
      const body = new Uint8Array(randomBytes(5 * 1024 * 1024));
      await client.produce("big", body);
      const { messages } = await client.consume("big", "bin", { format: "binary" });
      expect(messages).toHaveLength(1);
      expect(Buffer.from(messages[0]!.data as Uint8Array).equals(body)).toBe(true);
    });

    it("round-trips a 5 MiB binary message through JSON (base64)", async () => {
      const body = new Uint8Array(randomBytes(5 * 1024 * 1024));
      await client.produce("big-json", body, { format: "json" });
      const { messages } = await client.consume("big-json", "json");
      expect(Buffer.from(messages[0]!.data as Uint8Array).equals(body)).toBe(true);
    });

    it("takes pushes from the app's server code (useVQueue) into the same queues", async () => {
      const response = await fetch(`${host.url}/api/orders`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ item: "book" }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ queued: true, position: { part: 0, seq: 1 } });
      await client.produce("orders", { item: "pen", via: "http" });
      const { messages } = await client.consume<{ item: string }>("orders", "billing", { maxMessages: 10, json: true });
      expect(messages.map((m) => (m.data as { item: string }).item)).toEqual(["book", "pen"]);
    });

    it("serves the dashboard at /_queue/ behind auth (/_queue redirects there), and it works in Chromium", async () => {
      const redirect = await fetch(`${host.url}/_queue`, { redirect: "manual" });
      expect(redirect.status).toBe(308);
      expect(redirect.headers.get("location")).toBe("/_queue/");
      const anonymous = await fetch(`${host.url}/_queue/`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get("www-authenticate")).toMatch(/^Basic realm=/);
      const page = await fetch(`${host.url}/_queue/`, { headers: { authorization: `Basic ${btoa(`${ADMIN.username}:${ADMIN.password}`)}` } });
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await page.text()).toMatch(/\.\/_dashboard\/app\.[0-9a-f]+\.js/);
      if (!HAS_CHROMIUM || !chromium) return;
      await client.produce("dashboard", ["seen in the page"]);
      const browser = await launch();
      try {
        const { page: tab, problems } = await openPage(browser, { credentials: ADMIN });
        await tab.goto(`${host.url}/_queue`);
        await tab.locator("#queue-rows a", { hasText: /^dashboard$/ }).waitFor({ timeout: 15_000 });
        expect(new URL(tab.url()).pathname).toBe("/_queue/");
        expect(problems).toEqual([]);
      } finally {
        await browser.close();
      }
    }, 60_000);

    it.runIf(signals)("on SIGTERM ends a long poll at once, closes the queues (no lock left) and exits", async () => {
      await client.produce("shutdown", "x");
      await client.commit("shutdown", "c", (await client.consume("shutdown", "c")).cursor);
      expect(lockFiles(host.dataDir).length).toBeGreaterThan(0);
      const polling = client.consume("shutdown", "c", { timeoutMs: 30_000 });
      await sleep(300);
      const start = performance.now();
      const code = await host.stop();
      const result = await polling.catch((error: unknown) => error as Error);
      // Answered (empty) or cut by the closing server: either way not after 30 s.
      if (result instanceof Error) expect(result).not.toBeInstanceOf(VQueueClientError);
      else expect(result.messages).toEqual([]);
      expectEndedEarly(start, 30_000);
      expect(code).toBe(sigtermExit);
      expect(lockFiles(host.dataDir)).toEqual([]);
    });

    it.runIf(signals)("after a SIGKILL, a restart on the same data takes the stale locks over and has every acknowledged message", async () => {
      const first = await start(app);
      let second: RunningHost | undefined;
      try {
        const before = createClient({ baseURL: `${first.url}/_queue`, auth: ADMIN });
        const sent = Array.from({ length: 20 }, (_, i) => `m${i}`);
        for (const message of sent) await before.produce("crash", message);
        const read = await before.consume("crash", "c", { maxMessages: 5 });
        await before.commit("crash", "c", read.cursor);
        first.kill();
        for (const until = Date.now() + 10_000; first.running() && Date.now() < until;) await sleep(20);
        expect(first.running()).toBe(false);
        expect(lockFiles(first.dataDir).length).toBeGreaterThan(0); // left by the dead process

        second = await start(app, first.dataDir);
        const after = createClient({ baseURL: `${second.url}/_queue`, auth: ADMIN });
        await after.produce("crash", "after-restart"); // the writer's lock, taken over
        const { messages } = await after.consume("crash", "c", { maxMessages: 100 }); // the consumer's
        expect(messages.map((m) => m.data)).toEqual([...sent.slice(5), "after-restart"]);
      } finally {
        first.kill();
        await second?.stop().catch(() => second?.kill());
      }
    });
  });
}

function ms(value: number): string {
  return `${(value / 1000).toFixed(1)} s`;
}
