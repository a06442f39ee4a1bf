import { writeFileSync } from "node:fs";
import { join } from "pathe";
import { serve } from "srvx";
import { describe, expect, it } from "vitest";
import { freePort } from "../helpers/net";
import { HAS_CHROMIUM, openPage, useDashboardServer } from "./_dashboard";

/**
 * The dashboard opened the way many people open a page behind Basic auth, credentials in its
 * address (`http://user:pass@host/`): fetch refuses such URLs, so the page must make its own
 * without them. And when a request does fail, the banner says what really went wrong.
 */
const ADMIN = { username: "admin", password: "admin-secret" };

const env = useDashboardServer({ auth: { users: [ADMIN] } }, ADMIN);

/** The page's address with the admin's credentials in it. */
const withCredentials = (hash = "") => `http://${ADMIN.username}:${ADMIN.password}@127.0.0.1:${env.server.port}/${hash}`;

describe.skipIf(!HAS_CHROMIUM && !process.env.CI)("dashboard opened with credentials in its URL (http://user:pass@host/)", () => {
  it("loads its data, shows a queue and its outcomes, browses it and produces to it", async () => {
    await env.admin.produce("orders", ["first order", { item: "book" }]);
    const [leased] = await env.admin.lease("orders", "workers", { max: 1 });
    await env.admin.ack("orders", "workers", leased!.lease);
    // No credentials given to the browser but those in the address.
    const { page, problems, context } = await openPage(env.browser);
    await page.goto(withCredentials());
    const row = page.locator("#queue-rows tr", { has: page.locator("a", { hasText: /^orders$/ }) });
    await row.waitFor({ timeout: 10_000 });
    await expect.poll(() => row.locator("td").nth(0).textContent(), { timeout: 10_000 }).toBe("2");
    expect(await page.locator("#banner").isVisible()).toBe(false);
    await row.locator("a").click();
    await page.locator("table[aria-label=Parts] tbody tr").first().waitFor({ timeout: 10_000 });
    // The outcomes' EventSource is sent the credentials of the address too.
    await expect.poll(() => page.locator("section.outcomes tr[data-kind]").allTextContents(), { timeout: 10_000 }).toHaveLength(1);
    expect(await page.locator("section.outcomes tr[data-kind] .badge").textContent()).toBe("completed");
    await page.locator("[data-action=produce]").click();
    await page.locator("dialog[open] [data-confirm]").click();
    await expect.poll(() => page.locator("dialog[open] .result").textContent()).toMatch(/^Produced to orders: part 0, seq \d+\.$/);
    await page.locator("dialog[open] [data-confirm]").click();
    await page.locator("[data-action=browse]").click();
    await expect.poll(() => page.locator(".message").count(), { timeout: 10_000 }).toBe(3);
    expect(await page.locator("#banner").isVisible()).toBe(false);
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);

  it("says what is wrong when a request fails: the server down, a 5xx, the credentials refused; and clears it once it passes", async () => {
    // The browser also answers a Basic challenge with these (once): headless, a challenge left unanswered waits forever.
    const { page, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(withCredentials());
    await page.locator("#queue-rows tr").first().waitFor({ timeout: 10_000 });
    const banner = page.locator("#banner");

    // The server down: no answer, said so (not a credentials or page problem); back up, the banner goes.
    await env.server.stop();
    await expect
      .poll(() => banner.textContent(), { timeout: 10_000 })
      .toMatch(
        new RegExp(`^No answer from the v-queue server at 127\\.0\\.0\\.1:${env.server.port} \\(.+\\): it is down, restarting, or unreachable from here\\.$`),
      );
    expect(await page.locator("#status").textContent()).toBe("Retrying…");
    await env.server.restart();
    await expect.poll(() => banner.isVisible(), { timeout: 10_000 }).toBe(false);

    // The browser offline: said so.
    await context.setOffline(true);
    await expect.poll(() => banner.textContent(), { timeout: 10_000 }).toBe("This browser is offline: no request reaches the v-queue server.");
    await context.setOffline(false);
    await expect.poll(() => banner.isVisible(), { timeout: 10_000 }).toBe(false);

    // A real 500: a queue's partition declaration damaged on disk, read by its message browser.
    writeFileSync(join(env.server.dir, "damaged_info_partitions"), "not a declaration");
    await page.goto(withCredentials("#/queues/damaged/browse"));
    await expect
      .poll(() => banner.textContent(), { timeout: 10_000 })
      .toMatch(/^The v-queue server failed \(HTTP 500, E_CORRUPT\): The partition declaration of queue "damaged" .* is damaged/);
    await page.goto(withCredentials("#/"));
    await expect.poll(() => banner.isVisible(), { timeout: 10_000 }).toBe(false);

    // The admin's password changed meanwhile: the credentials the page has are refused; changed back, they pass again.
    const users = (admin: typeof ADMIN) =>
      writeFileSync(env.server.configFile, JSON.stringify({ durability: "none", syncCommits: true, auth: { users: [admin] } }));
    await env.server.stop();
    users({ ...ADMIN, password: "changed" });
    await env.server.restart();
    await expect
      .poll(() => banner.textContent(), { timeout: 10_000 })
      .toBe("The server refused the credentials (Wrong username or password.): reload the page to sign in again.");
    await env.server.stop();
    users(ADMIN);
    await env.server.restart();
    await expect.poll(() => banner.isVisible(), { timeout: 10_000 }).toBe(false);
    await context.close();
  }, 90_000);

  it("behind a proxy: the proxy's own error page (v-queue down behind it) is told as something else answering", async () => {
    const proxy = await startProxy();
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    try {
      await page.goto(proxy.url!);
      await page.locator("#queue-rows tr").first().waitFor({ timeout: 10_000 });
      await env.server.stop();
      await expect
        .poll(() => page.locator("#banner").textContent(), { timeout: 10_000 })
        .toBe("The server answered HTTP 502 with no v-queue error: something in front of v-queue (a proxy, the host app) answered in its place.");
      await env.server.restart();
      await expect.poll(() => page.locator("#banner").isVisible(), { timeout: 10_000 }).toBe(false);
      // Chromium itself logs the 502's "Failed to load resource": that one is expected, nothing else.
      expect(problems.filter((p) => !/Failed to load resource: the server responded with a status of 502/.test(p))).toEqual([]);
    } finally {
      await context.close();
      await proxy.close(true);
    }
  }, 60_000);
  it("behind a proxy: the outcomes panel connects again after the proxy's 502 (the browser gave up), after the last event it had", async () => {
    await env.admin.produce("jobs", ["job 1", "job 2"]);
    const [one, two] = await env.admin.lease("jobs", "workers", { max: 2 });
    await env.admin.ack("jobs", "workers", one!.lease, { results: { [one!.lease]: 1 } });
    const proxy = await startProxy();
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    try {
      await page.goto(`${proxy.url!}#/queues/jobs`);
      const panel = page.locator("section.outcomes");
      const results = () => panel.locator("tr[data-kind] .detail").allTextContents();
      await expect.poll(results, { timeout: 10_000 }).toEqual(["1"]);
      // v-queue gone: the proxy answers the stream's reconnection with its 502, and EventSource closes for good.
      await env.server.stop();
      await expect.poll(() => panel.locator(".stream-state").getAttribute("data-state"), { timeout: 10_000 }).toBe("refused");
      await env.server.restart();
      await env.admin.ack("jobs", "workers", two!.lease, { results: { [two!.lease]: 2 } });
      await expect.poll(results, { timeout: 20_000 }).toEqual(["2", "1"]);
      await expect.poll(() => panel.locator(".stream-state").getAttribute("data-state"), { timeout: 10_000 }).toBe("live");
      // Chromium itself logs the 502s' "Failed to load resource": those are expected, nothing else.
      expect(problems.filter((p) => !/Failed to load resource: the server responded with a status of 502/.test(p))).toEqual([]);
    } finally {
      await context.close();
      await proxy.close(true);
    }
  }, 60_000);
});

/** A reverse proxy on its own port in front of the server, as nginx: its own 502 page once v-queue is gone. */
async function startProxy() {
  const proxy = serve({
    port: await freePort(),
    hostname: "127.0.0.1",
    silent: true,
    async fetch(request) {
      const url = new URL(request.url);
      const headers = new Headers(request.headers);
      headers.delete("accept-encoding");
      const answer = await fetch(`${env.server.url}${url.pathname}${url.search}`, {
        method: request.method,
        headers,
        body: request.body,
        duplex: "half",
      } as RequestInit).catch(() => undefined);
      if (!answer) return new Response("<html><body><h1>502 Bad Gateway</h1></body></html>", { status: 502, headers: { "content-type": "text/html" } });
      const answerHeaders = new Headers(answer.headers);
      answerHeaders.delete("content-encoding");
      answerHeaders.delete("content-length");
      return new Response(answer.body, { status: answer.status, headers: answerHeaders });
    },
  });
  await proxy.ready();
  return proxy;
}
