import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { existsSync } from "node:fs";
import { extname, resolve } from "pathe";
import type { Browser } from "../helpers/tool-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { freePort, startServerProcess, type ServerProcess } from "../client/_server-process";
import { CHROMIUM, launch } from "./_dashboard";
import { sleep } from "../helpers/sleep";

/**
 * The client SDK in a real browser: Debian's Chromium, driven by playwright-core, loads a
 * page from one origin that uses the built `dist/client.mjs` (through an import map) against
 * the standalone server on another origin, with CORS set by the server's `cors` option.
 */
const ROOT = resolve(import.meta.dirname, "../..");

let page: { server: Server; origin: string };
let api: ServerProcess;
let browser: Browser;

const IMPORT_MAP = {
  imports: {
    "v-queue/client": "/dist/client.mjs",
    ofetch: "/node_modules/ofetch/dist/index.mjs",
    destr: "/node_modules/destr/dist/index.mjs",
    ufo: "/node_modules/ufo/dist/index.mjs",
  },
};

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>v-queue in a browser</title>
<script type="importmap">${JSON.stringify(IMPORT_MAP)}</script>
<script type="module">
  import { createClient } from "v-queue/client";
  window.vq = { createClient };
  document.body.dataset.ready = "yes";
</script></head><body>v-queue client page</body></html>`;

/** Serves the page and, read-only, the built client and its dependencies. */
function servePage(port: number): Promise<Server> {
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/") return res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    if (!path.startsWith("/dist/") && !path.startsWith("/node_modules/")) return res.writeHead(404).end();
    const file = resolve(ROOT, `.${path}`);
    if (!file.startsWith(ROOT) || extname(file) !== ".mjs") return res.writeHead(404).end();
    try {
      res.writeHead(200, { "content-type": "text/javascript" }).end(await readFile(file));
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((done) => server.listen(port, "127.0.0.1", () => done(server)));
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    if (process.env.CI) throw new Error(`Chromium not found at ${CHROMIUM}: install Debian's chromium package (.ci/run does).`);
    return;
  }
  if (!existsSync(resolve(ROOT, "dist/client.mjs"))) throw new Error("Build first: npm run build (the page loads dist/client.mjs).");
  const port = await freePort();
  page = { server: await servePage(port), origin: `http://127.0.0.1:${port}` };
  api = await startServerProcess({
    cors: { origin: [page.origin] },
    auth: { users: [{ username: "web", password: "pa:ss" }] },
  });
  browser = await launch();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await api?.remove();
  await new Promise((done) => (page?.server ? page.server.close(done) : done(undefined)));
});

describe.skipIf(!existsSync(CHROMIUM) && !process.env.CI)("client SDK in headless Chromium", () => {
  it("produces, consumes (JSON and binary), subscribes and commits from a page on another origin", async () => {
    const tab = await browser.newPage();
    await tab.goto(page.origin);
    await tab.waitForSelector("body[data-ready=yes]");
    const node = createClient({ baseURL: api.url, auth: { username: "web", password: "pa:ss" } });

    const running = tab.evaluate(async (baseURL) => {
      const { createClient } = (window as unknown as { vq: typeof import("../../client/index") }).vq;
      const client = createClient({ baseURL, auth: { username: "web", password: "pa:ss" } });
      const produced = await client.produce("browser", ["from the page", { n: 1 }, new Uint8Array([0, 255, 7])]);
      const json = await client.consume("browser", "tab", { maxMessages: 2 });
      const binary = await client.consume("browser", "tab", { maxMessages: 5, format: "binary" });
      await client.commit("browser", "tab");
      const controller = new AbortController();
      const live: unknown[] = [];
      for await (const message of client.subscribe("browser", "live", { signal: controller.signal, pollTimeoutMs: 5000 })) {
        live.push(message.data instanceof Uint8Array ? [...message.data] : message.data);
        if (message.data === "pushed from node") controller.abort();
      }
      const consumers = await client.consumers("browser");
      return {
        produced: produced.count,
        json: json.messages.map((m) => m.data),
        binary: binary.messages.map((m) => [...(m.data as Uint8Array)]),
        live,
        consumers: consumers.consumers.map((c) => [c.name, c.lag]),
        origin: location.origin,
      };
    }, api.url);
    // Pushed from Node while the page's subscriber is waiting for it.
    await sleep(1500);
    await node.produce("browser", "pushed from node");
    const result = await running.catch((error: Error) => error);
    expect(result).not.toBeInstanceOf(Error);
    const r = result as Exclude<typeof result, Error>;
    expect(r.origin).toBe(page.origin);
    expect(r.produced).toBe(3);
    expect(r.json).toEqual(["from the page", '{"n":1}']);
    expect(r.binary).toEqual([[0, 255, 7]]);
    expect(r.live.at(-1)).toBe("pushed from node");
    expect(r.consumers).toEqual([
      ["live", 0],
      ["tab", 1],
    ]);
    await tab.close();
  }, 60_000);

  it("follows outcomes from a page: events() (resumed after a cursor, through CORS) and finished()", async () => {
    const tab = await browser.newPage();
    await tab.goto(page.origin);
    await tab.waitForSelector("body[data-ready=yes]");
    const result = await tab
      .evaluate(async (baseURL) => {
        const { createClient } = (window as unknown as { vq: typeof import("../../client/index") }).vq;
        const client = createClient({ baseURL, auth: { username: "web", password: "pa:ss" } });
        const produced = await client.produce("outcomes", "job");
        const [m] = await client.lease("outcomes", "w", { leaseMs: 60_000 });
        await client.progress("outcomes", "w", m!.lease, { pct: 50 });
        await client.ack("outcomes", "w", m!.lease, { results: { [m!.lease]: "made in a tab" } });
        const take = async (options: Parameters<typeof client.events>[2], count: number) => {
          const got: { kind: string; cursor: string }[] = [];
          for await (const event of client.events("outcomes", "w", options)) if (got.push(event) === count) break;
          return got;
        };
        const all = await take({ from: "oldest" }, 2);
        const resumed = await take({ after: all[0]!.cursor }, 1);
        const finished = await client.finished("outcomes", "w", produced, { timeoutMs: 10_000 });
        return { kinds: all.map((e) => e.kind), resumed: resumed.map((e) => e.kind), result: finished.result };
      }, api.url)
      .catch((error: Error) => error);
    expect(result).toEqual({ kinds: ["progress", "completed"], resumed: ["completed"], result: "made in a tab" });
    await tab.close();
  }, 60_000);

  it("is refused by CORS from an origin the server does not allow, as a network error", async () => {
    const tab = await browser.newPage();
    // The same page, but reached through "localhost": another origin than the one allowed.
    await tab.goto(page.origin.replace("127.0.0.1", "localhost"));
    await tab.waitForSelector("body[data-ready=yes]");
    const outcome = await tab.evaluate(async (baseURL) => {
      const { createClient } = (window as unknown as { vq: typeof import("../../client/index") }).vq;
      const client = createClient({ baseURL, auth: { username: "web", password: "pa:ss" } });
      return client.queues().then(
        () => "allowed",
        (error: Error) => error.name,
      );
    }, api.url);
    expect(outcome).toBe("VQueueNetworkError");
    await tab.close();
  }, 30_000);

  it("answers a preflight with the allowed origin and methods", async () => {
    const res = await fetch(`${api.url}/api/v1/queues/browser/messages`, {
      method: "OPTIONS",
      headers: { origin: page.origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type" },
    });
    expect(res.status).toBeLessThan(300);
    expect(res.headers.get("access-control-allow-origin")).toBe(page.origin);
    expect(res.headers.get("access-control-allow-methods")).toMatch(/POST/);
    expect(res.headers.get("access-control-allow-headers")?.toLowerCase()).toMatch(/authorization/);
  });
});
