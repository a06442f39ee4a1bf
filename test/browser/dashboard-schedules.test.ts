import { describe, expect, it } from "vitest";
import { HAS_CHROMIUM, openPage, screenshots, useDashboardServer } from "./_dashboard";

/**
 * A queue's schedules on its dashboard page (headless Chromium, the standalone server): each with
 * its timing, message, last and next firing; none, no section.
 */
const ADMIN = { username: "admin", password: "admin-secret" };

const env = useDashboardServer({ auth: { users: [ADMIN] } }, ADMIN);

describe.skipIf(!HAS_CHROMIUM && !process.env.CI)("dashboard: a queue's schedules", () => {
  it("lists them with their timing, message, last and next firing; a queue without any shows no section", async () => {
    await env.admin.schedule("jobs", "beat", { everyMs: 1000, message: "tick" });
    await env.admin.schedule("jobs", "nightly", { cron: "0 3 * * *", tz: "Europe/Paris" });
    await env.admin.produce("plain", "x");
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/jobs`);
    const rows = page.locator("table[aria-label=Schedules] tbody tr");
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(2);
    expect(await page.locator("table[aria-label=Schedules] thead th").allTextContents()).toEqual(["Schedule", "When", "Message", "Last firing", "Next firing"]);
    const beat = page.locator("tr[data-schedule=beat] td");
    expect(await beat.nth(0).textContent()).toBe("every 1 s");
    expect(await beat.nth(1).textContent()).toBe("tick");
    // It fires each second: its last firing shows once the page refreshes.
    await expect.poll(() => beat.nth(2).textContent(), { timeout: 10_000 }).not.toBe("never");
    const nightly = page.locator("tr[data-schedule=nightly] td");
    expect(await nightly.nth(0).textContent()).toBe("0 3 * * * Europe/Paris");
    expect(await nightly.nth(1).textContent()).toBe("{schedule, tick, at}");
    expect(await nightly.nth(2).textContent()).toBe("never");
    expect(await nightly.nth(3).textContent()).toMatch(/\d{4}/);
    await screenshots(page, "schedules");

    await page.goto(`${env.server.url}/#/queues/plain`);
    await page.locator("table[aria-label=Consumers]").waitFor();
    await page.waitForTimeout(1500);
    expect(await page.locator("table[aria-label=Schedules]").isVisible()).toBe(false);
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);
});
