import { gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler, type QueueAppOptions, type QueueHandler } from "../../runtime/index";
import { DASHBOARD_ASSETS, DASHBOARD_INDEX } from "../../runtime/dashboard/assets.generated";
import { startServer } from "./_server";
import { sleep } from "../helpers/sleep";

/** The dashboard's serving: the page, its hashed files, caching, gzip, HEAD, auth, and the option that turns it off. */
const auth = { users: [{ username: "web", password: "pa:ss" }] };
const credentials = { authorization: `Basic ${btoa("web:pa:ss")}` };

const handlers: QueueHandler[] = [];
afterEach(async () => {
  for (const h of handlers.splice(0)) await h.close();
});

function app(options: QueueAppOptions = {}): (path: string, init?: RequestInit) => Promise<Response> {
  const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none", ...options });
  handlers.push(handler);
  return (path, init) => handler.fetch(new Request(`http://vq.local${path}`, init));
}

const linked = () => [...DASHBOARD_INDEX.body.matchAll(/\.\/_dashboard\/([\w.-]+)/g)].map((m) => m[1]!);

describe("dashboard serving", () => {
  it("serves the page at / (no-cache, ETag, CSP) linking only relative, hashed files that exist", async () => {
    const res = await app()("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(res.headers.get("etag")).toBe(`"${DASHBOARD_INDEX.hash}"`);
    expect(res.headers.get("content-security-policy")).toMatch(/script-src 'self'/);
    const html = await res.text();
    expect(html).toBe(DASHBOARD_INDEX.body);
    // No absolute URL: the page works under any prefix; nothing from another origin.
    expect(html).not.toMatch(/(src|href)="\/(?!\/)/);
    expect(html).not.toMatch(/https?:\/\//);
    expect(linked().length).toBeGreaterThan(5);
    for (const name of linked()) {
      expect(Object.hasOwn(DASHBOARD_ASSETS, name), name).toBe(true);
      expect(name).toContain(DASHBOARD_ASSETS[name]!.hash);
    }
  });

  it("serves files for a year, answers 304 to their ETag, gzips when asked, and HEAD sends no body", async () => {
    const call = app();
    const name = linked().find((n) => n.startsWith("app."))!;
    const asset = DASHBOARD_ASSETS[name]!;
    const plain = await call(`/_dashboard/${name}`);
    expect(plain.status).toBe(200);
    expect(plain.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(plain.headers.get("cache-control")).toBe("private, max-age=31536000, immutable");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(await plain.text()).toBe(asset.body);

    const zipped = await call(`/_dashboard/${name}`, { headers: { "accept-encoding": "br, gzip;q=0.8" } });
    expect(zipped.headers.get("content-encoding")).toBe("gzip");
    expect(zipped.headers.get("vary")).toBe("accept-encoding");
    const bytes = new Uint8Array(await zipped.arrayBuffer());
    expect(Number(zipped.headers.get("content-length"))).toBe(bytes.length);
    expect(gunzipSync(bytes).toString("utf8")).toBe(asset.body);
    expect((await call(`/_dashboard/${name}`, { headers: { "accept-encoding": "gzip;q=0" } })).headers.get("content-encoding")).toBeNull();

    const again = await call(`/_dashboard/${name}`, { headers: { "if-none-match": `W/"x", "${asset.hash}"` } });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe("");

    const head = await call(`/_dashboard/${name}`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get("content-length"))).toBe(new TextEncoder().encode(asset.body).length);
    expect(await head.text()).toBe("");
  });

  it("answers an unknown file with the JSON 404", async () => {
    const res = await app()("/_dashboard/app.js");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: "E_NOT_FOUND", message: 'No dashboard file "app.js".' } });
    expect((await app()("/_dashboard/__proto__")).status).toBe(404);
  });

  it("is behind the API's auth: 401 with a Basic challenge (so a browser prompts), then served", async () => {
    const call = app({ auth });
    for (const path of ["/", `/_dashboard/${linked()[0]}`]) {
      const res = await call(path);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Basic realm="v-queue", charset="UTF-8"');
      expect((await call(path, { headers: credentials })).status).toBe(200);
    }
  });

  it("with dashboard: false, / is the JSON 404 as without it", async () => {
    const res = await app({ dashboard: false })("/");
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { code: "E_ROUTE" } });
    expect((await app({ dashboard: false })(`/_dashboard/${linked()[0]}`)).status).toBe(404);
    expect(() => createQueueHandler({ driver: memoryDriver({}), dashboard: "yes" as never })).toThrow(/dashboard/);
  });

  it("other paths ending in / are not the page: a JSON 404, not a 405", async () => {
    const res = await app()("/api/v1/queues/", { method: "POST" });
    expect(res.status).toBe(404);
    expect((await app()("/", { method: "POST" })).status).toBe(405);
  });

  it("answers at most monitor.historyPoints samples when more are asked for", async () => {
    // About 36 samples are taken meanwhile (fewer on a loaded machine, whose timers run late).
    const handler = app({ monitor: { historyPoints: 10, sampleMs: 100 } });
    await handler("/api/v1/queues/q/messages", { method: "POST", body: "x" });
    await handler("/api/v1/overview"); // a look: sampling starts
    await sleep(3600);
    const res = await handler("/api/v1/overview?history=300");
    expect(res.status).toBe(200);
    const { queues } = (await res.json()) as { queues: { history: { t: number[] } }[] };
    expect(queues[0]!.history.t.length).toBe(10);
  });

  it("gzips over a real socket (the standalone server)", async () => {
    const server = await startServer();
    const res = await fetch(`${server.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-encoding")).toBe("gzip");
    expect(await res.text()).toBe(DASHBOARD_INDEX.body);
  });
});
