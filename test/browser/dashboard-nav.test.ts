import { afterAll, expect, it } from "vitest";
import type { Browser } from "../helpers/tool-types";
import { jsonHeaders, startServer } from "../http/_server";
import { launch, openPage } from "../browser/_dashboard";
import { sleep } from "../helpers/sleep";

let browser: Browser | undefined;
afterAll(async () => browser?.close());

it("loads a queue page chosen while the list's poll is still in flight (a slow link, 1,000 queues)", async () => {
  const s = await startServer({ monitor: { sampleMs: 200 } });
  await s.post("/api/v1/queues/orders/messages", JSON.stringify({ messages: ["a"] }), jsonHeaders);
  browser = await launch();
  const { page, problems } = await openPage(browser);
  // A slow list poll (a slow link, or 1,000 queues): 1.5 s.
  await page.route("**/api/v1/overview?*", async (route) => {
    await sleep(1500);
    await route.continue().catch(() => {});
  });
  const detail: string[] = [];
  page.on("request", (r) => {
    if (r.url().includes("/queues/orders/overview")) detail.push(r.url());
  });
  await page.goto(`${s.url}/`);
  await page.waitForTimeout(300); // the list's first poll is in flight
  await page.evaluate(() => {
    location.hash = "#/queues/orders";
  });
  await page.locator("table[aria-label=Parts] tbody tr").first().waitFor({ timeout: 10_000 });
  expect(detail.length).toBeGreaterThan(0);
  expect(problems).toEqual([]);
}, 30_000);
