import { describe, expect, it } from "vitest";
import { HAS_CHROMIUM, openPage, screenshots, setHidden, useDashboardServer } from "./_dashboard";

/**
 * The dashboard in Debian's Chromium (playwright-core), served by the standalone server
 * (`v-queue serve`, its own process) with auth on: what a person sees and does, screen by
 * screen, with no console error on the way.
 */
const ADMIN = { username: "admin", password: "admin-secret" };
const READER = { username: "reader", password: "reader-secret" };

const env = useDashboardServer({ auth: { users: [ADMIN, { ...READER, write: false }] } }, ADMIN);

describe.skipIf(!HAS_CHROMIUM && !process.env.CI)("dashboard in headless Chromium (standalone server, auth on)", () => {
  it("asks for credentials: 401 with a Basic challenge on the page and its files", async () => {
    const page = await fetch(`${env.server.url}/`);
    expect(page.status).toBe(401);
    expect(page.headers.get("www-authenticate")).toMatch(/^Basic realm="v-queue"/);
    const html = await (await fetch(`${env.server.url}/`, { headers: { authorization: `Basic ${btoa(`${ADMIN.username}:${ADMIN.password}`)}` } })).text();
    const asset = /\.\/_dashboard\/(app\.[0-9a-f]+\.js)/.exec(html)![1]!;
    expect((await fetch(`${env.server.url}/_dashboard/${asset}`)).status).toBe(401);
  });

  it("lists queues with their lag, which change as messages are produced", async () => {
    await env.admin.produce("orders", ["first order", { item: "book", qty: 2 }, new Uint8Array([0, 1, 2, 255, 0x41, 0x42])]);
    const taken = await env.admin.consume("orders", "billing", { maxMessages: 1 });
    await env.admin.commit("orders", "billing", taken.cursor);
    await env.admin.produce("emails", "hello");
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/`);
    const row = page.locator("#queue-rows tr", { has: page.locator("a", { hasText: /^orders$/ }) });
    await expect.poll(() => row.locator("td").nth(0).textContent(), { timeout: 10_000 }).toBe("3");
    expect(await page.locator("table.queues thead th").allTextContents()).toEqual([
      "Queue▲",
      "Messages",
      "Worst lag",
      "Size",
      "Parts",
      "Produce/s",
      "Consume/s",
      "in out",
    ]);
    // Worst lag: billing has 2 messages to go.
    await expect.poll(() => row.locator("td.lag").textContent(), { timeout: 10_000 }).toBe("2billing");
    expect(await page.locator("#queue-rows tr").count()).toBe(2);

    await env.admin.produce("orders", ["a", "b", "c", "d"]);
    await expect.poll(() => row.locator("td").nth(0).textContent(), { timeout: 10_000 }).toBe("7");
    await expect.poll(() => row.locator("td.lag").textContent(), { timeout: 10_000 }).toBe("6billing");

    // Sorted by messages, most first; then filtered.
    await page.getByRole("button", { name: "Messages" }).click();
    expect(await page.locator("#queue-rows tr th a").allTextContents()).toEqual(["orders", "emails"]);
    await page.getByLabel("Filter queues by name").fill("mail");
    expect(await page.locator("#queue-rows tr th a").allTextContents()).toEqual(["emails"]);
    await page.getByLabel("Filter queues by name").fill("");
    await screenshots(page, "queues");
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);

  it("shows a queue (charts, parts, consumers); produces a test message and purges, each confirmed in a dialog", async () => {
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/orders`);
    await page.locator("table[aria-label=Consumers] tr[data-consumer=billing]").waitFor();
    expect(await page.locator(".chart canvas").count()).toBeGreaterThanOrEqual(2);
    expect(await page.locator("table[aria-label=Parts] tbody tr").count()).toBe(1);
    await page.waitForTimeout(1500);
    await screenshots(page, "queue");

    const messagesCard = page.locator(".card", { hasText: "Messages" }).locator(".card-value");
    const before = Number((await messagesCard.textContent())!.replace(/,/g, ""));
    await page.locator("[data-action=produce]").click();
    const dialog = page.locator("dialog[open]");
    await expect.poll(() => dialog.locator("h2").textContent()).toBe("Produce a test message to orders");
    await screenshots(page, "dialog");
    await dialog.locator("[data-confirm]").click();
    await expect.poll(() => dialog.locator(".result").textContent()).toMatch(/^Produced to orders: part 0, seq \d+\.$/);
    await dialog.locator("[data-confirm]").click();
    await expect.poll(() => page.locator("dialog").count()).toBe(0);
    await expect.poll(async () => Number((await messagesCard.textContent())!.replace(/,/g, "")), { timeout: 10_000 }).toBe(before + 1);

    // With options: a priority puts it before the backlog for a shared consumer; a key produces it once.
    for (let i = 0; i < 2; i++) {
      await page.locator("[data-action=produce]").click();
      await dialog.locator("select[name=kind]").selectOption("text");
      await dialog.locator("textarea[name=body]").fill("dashboard-urgent");
      await dialog.locator("details.options summary").click();
      await dialog.locator("input[name=priority]").fill("7");
      await dialog.locator("input[name=key]").fill("dashboard-once");
      await dialog.locator("[data-confirm]").click();
      await expect.poll(() => dialog.locator(".result").textContent()).toMatch(/^Produced to orders: part 0, seq \d+\.$/);
      await dialog.locator("[data-confirm]").click();
      await expect.poll(() => page.locator("dialog").count()).toBe(0);
    }
    expect((await env.admin.queue("orders")).messages).toBe(before + 2);
    const [first] = await env.admin.lease("orders", "dashboard-check", { max: 1 });
    expect(first?.data).toBe("dashboard-urgent");

    // Purge, cancelled first: nothing happens.
    await page.locator("[data-action=purge]").click();
    await page.locator("dialog[open] [data-cancel]").click();
    expect((await env.admin.queue("orders")).messages).toBe(before + 2);
    await page.locator("[data-action=purge]").click();
    await page.locator("dialog[open] [data-confirm]").click();
    await expect.poll(() => page.locator("dialog[open] .result").textContent()).toBe(`Purged: ${before + 2} messages removed.`);
    expect((await env.admin.queue("orders")).messages).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  }, 60_000);

  it("follows the system's dark theme", async () => {
    await env.admin.produce("orders", ["again", "and again"]);
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN, colorScheme: "dark" });
    await page.goto(`${env.server.url}/#/queues/orders`);
    await page.locator("tr[data-consumer=billing]").waitFor();
    const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(background).toBe("rgb(14, 17, 22)");
    await page.waitForTimeout(1000);
    await screenshots(page, "queue-dark");
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("offers a read-only user no produce, purge nor delete", async () => {
    await env.admin.consume("emails", "sender");
    const { page, problems, context } = await openPage(env.browser, { credentials: READER });
    await page.goto(`${env.server.url}/#/queues/emails`);
    await page.locator("tr[data-consumer=sender]").waitFor();
    await page.locator("[data-action=browse]").waitFor();
    expect(await page.locator("[data-action=produce], [data-action=purge], [data-action=delete]").count()).toBe(0);
    // Read is enough to move a consumer.
    expect(await page.locator("tr[data-consumer=sender] [data-action=seek]").count()).toBe(1);
    await page.locator("tr[data-consumer=sender] [data-action=seek]").click();
    await page.locator("dialog[open] select[name=to]").selectOption("latest");
    await page.locator("dialog[open] [data-confirm]").click();
    await expect.poll(() => page.locator("dialog[open] .result").textContent()).toMatch(/^Consumer sender moved: it goes on after cursor \d+\.\d+\.\d+\.$/);
    await page.locator("dialog[open] [data-confirm]").click();
    expect((await env.admin.consumers("emails")).consumers.find((c) => c.name === "sender")?.lag).toBe(0);
    await page.goto(`${env.server.url}/#/`);
    await page.locator("#queue-rows tr").first().waitFor();
    expect(await page.locator("[data-action=produce]").count()).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("deletes a consumer; links a queue to its dead letters, and re-drives them from there", async () => {
    await env.admin.produce("jobs", ["bad job", "good job"]);
    const [leased] = await env.admin.lease("jobs", "workers", { max: 1 });
    await env.admin.nack("jobs", "workers", leased!.lease, { deadLetter: true });
    await env.admin.consume("jobs", "old-reader");
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/jobs`);
    await expect.poll(() => page.locator("tr[data-consumer=workers] .badge").textContent(), { timeout: 10_000 }).toBe("shared");
    await page.locator(".dlq a").waitFor({ timeout: 10_000 });
    await screenshots(page, "queue-shared");
    // A consumer deleted (admin), confirmed in its dialog.
    await page.locator("tr[data-consumer=old-reader] [data-action=delete]").click({ timeout: 10_000 });
    await page.locator("dialog[open] [data-confirm]").click();
    await expect.poll(() => page.locator("dialog[open] .result").textContent()).toBe("Consumer old-reader deleted.");
    await page.locator("dialog[open] [data-confirm]").click();
    expect((await env.admin.consumers("jobs")).consumers.map((c) => c.name)).toEqual(["workers"]);
    await expect.poll(() => page.locator("tr[data-consumer=old-reader]").count(), { timeout: 10_000 }).toBe(0);
    await page.locator(".dlq a", { hasText: "jobs.dead" }).click({ timeout: 10_000 });
    await page.locator("[data-action=redrive]").click();
    await page.locator("dialog[open] [data-confirm]").click();
    await expect.poll(() => page.locator("dialog[open] .result").textContent()).toBe("1 dead letter moved back.");
    expect((await env.admin.queue("jobs")).messages).toBe(3);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("shows a dead letter's body as the browser shows any message, with its origin, deliveries, last error and time as a date", async () => {
    await env.admin.produce("tasks", [{ nested: { a: [1, 2] } }, "plain text here", new Uint8Array([0, 1, 2, 255, 0x41, 0x42])]);
    const leased = await env.admin.lease("tasks", "workers", { max: 3 });
    expect(leased.length).toBe(3);
    const before = Date.now();
    for (const [i, m] of leased.entries()) await env.admin.nack("tasks", "workers", m.lease, { deadLetter: true, error: `failed "${i}"\nline two` });
    const after = Date.now();
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/tasks.dead/browse`);
    await page.locator(".message").nth(2).waitFor({ timeout: 10_000 });
    expect(await page.locator(".message").evaluateAll((nodes) => nodes.map((n) => [n.getAttribute("data-kind"), n.hasAttribute("data-dead-letter")]))).toEqual([
      ["json", true],
      ["text", true],
      ["bytes", true],
    ]);
    // The bodies as the browser shows the original messages (the same as in the next test).
    const bodies = await page.locator(".message .body").allTextContents();
    expect(bodies[0]).toBe(JSON.stringify({ nested: { a: [1, 2] } }, null, 2));
    expect(bodies[1]).toBe("plain text here");
    expect(bodies[2]).toMatch(/^00000000 {2}00 01 02 ff 41 42 .*\|\.\.\.\.AB\|$/);
    expect(await page.locator(".message header .badge.dead").allTextContents()).toEqual(["Dead letter", "Dead letter", "Dead letter"]);
    // Their sizes: the original bodies'.
    expect(await page.locator(".message").evaluateAll((nodes) => nodes.map((n) => n.querySelectorAll("header .muted")[1]?.textContent))).toEqual([
      "22 B",
      "15 B",
      "6 B",
    ]);
    const first = page.locator(".message").first().locator(".letter");
    expect(await first.locator("dt").allTextContents()).toEqual(["From", "Delivered", "Dead-lettered", "Last error"]);
    const details = await first.locator("dd").allTextContents();
    expect(details.slice(0, 2)).toEqual([`tasks · consumer workers · part 0 · #${leased[0]!.seq}`, "1 time"]);
    expect(details[3]).toBe('failed "0"\nline two');
    expect(await first.locator("dd a").getAttribute("href")).toBe("#/queues/tasks");
    // The time as a date and time, the exact instant in its datetime attribute.
    const time = first.locator("time");
    expect(await time.textContent()).toMatch(/^[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d{2}:\d{2}\s[AP]M$/);
    const at = Date.parse((await time.getAttribute("datetime"))!);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(after);
    await screenshots(page, "dead-letters");
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("browses messages without moving a consumer: text as text, JSON pretty-printed, bytes as hex", async () => {
    await env.admin.produce("browse", ["plain text here", { nested: { a: [1, 2] } }, new Uint8Array([0, 1, 2, 255, 0x41, 0x42])]);
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/browse/browse`);
    await page.locator(".message").nth(2).waitFor({ timeout: 10_000 });
    const kinds = await page.locator(".message").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("data-kind")));
    expect(kinds).toEqual(["text", "json", "bytes"]);
    const bodies = await page.locator(".message .body").allTextContents();
    expect(bodies[0]).toBe("plain text here");
    expect(bodies[1]).toBe(JSON.stringify({ nested: { a: [1, 2] } }, null, 2));
    expect(bodies[2]).toMatch(/^00000000 {2}00 01 02 ff 41 42 .*\|\.\.\.\.AB\|$/);
    await screenshots(page, "browser");
    // Pages of 10, the next one under them; then from a part and seq, then the newest.
    await env.admin.produce(
      "browse",
      Array.from({ length: 22 }, (_, i) => `m${i + 4}`),
    );
    await page.locator("select[name=limit]").selectOption("10");
    await page.getByRole("button", { name: "Show" }).click();
    await expect.poll(() => page.locator(".message").count()).toBe(10);
    await page.locator("[data-action=next]").click();
    await expect.poll(() => page.locator(".message").count()).toBe(20);
    expect(await page.locator(".message header strong").nth(19).textContent()).toBe("#20");
    await page.locator("#browse-from").selectOption("seq");
    await page.locator("input[name=seq]").fill("24");
    await page.getByRole("button", { name: "Show" }).click();
    await expect.poll(() => page.locator(".message header strong").allTextContents()).toEqual(["#24", "#25"]);
    expect(await page.locator(".pager").textContent()).toContain("End of the queue.");
    await page.locator("#browse-from").selectOption("latest");
    await page.getByRole("button", { name: "Show" }).click();
    await expect.poll(() => page.locator(".message header strong").first().textContent()).toBe("#16");
    // From a date and time, in the browser's time zone: an hour ahead, nothing yet; an hour ago, every message.
    await page.locator("#browse-from").selectOption("time");
    for (const [offset, expected] of [
      [3_600_000, "No messages here."],
      [-3_600_000, "#1"],
    ] as const) {
      await page.locator("input[name=time]").evaluate((input: HTMLInputElement, ms) => {
        const d = new Date(Date.now() + ms);
        input.value = new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
      }, offset);
      await page.getByRole("button", { name: "Show" }).click();
      await expect
        .poll(() => page.locator(".messages > :first-child").evaluate((n) => n.querySelector("header strong")?.textContent ?? n.textContent))
        .toBe(expected);
    }
    // Nothing moved: no consumer was created by reading.
    expect((await env.admin.consumers("browse")).consumers).toEqual([]);
    expect(problems).toEqual([]);
    await context.close();
  }, 30_000);

  it("shows a shared consumer's outcomes as they happen: progress, a result, a dead letter's error; resumes after a restart and a hidden tab, none twice; keeps the newest 200", async () => {
    await env.admin.produce("reports", ["report 1", "report 2"]);
    const [one, two] = await env.admin.lease("reports", "workers", { max: 2 });
    await env.admin.progress("reports", "workers", one!.lease, { done: 0.5 });
    const { page, problems, context } = await openPage(env.browser, { credentials: ADMIN });
    await page.goto(`${env.server.url}/#/queues/reports`);
    const panel = page.locator("section.outcomes");
    const rows = panel.locator("table[aria-label=Outcomes] tbody tr[data-kind]");
    const seen = () => rows.evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll("td")].slice(1).map((td) => td.textContent)));
    // Kept before the page opened: shown from the oldest kept; then live.
    await expect.poll(() => panel.locator(".stream-state").getAttribute("data-state"), { timeout: 10_000 }).toBe("live");
    await expect.poll(seen, { timeout: 10_000 }).toEqual([["progress", `${one!.part}.${one!.offset} #${one!.seq}`, "1", '{"done":0.5}']]);
    await env.admin.ack("reports", "workers", one!.lease, { results: { [one!.lease]: { url: "/reports/1.pdf" } } });
    await env.admin.nack("reports", "workers", two!.lease, { deadLetter: true, error: "no such report" });
    // Newest first.
    const expected = [
      ["dead", `${two!.part}.${two!.offset} #${two!.seq}`, "1", "no such report"],
      ["completed", `${one!.part}.${one!.offset} #${one!.seq}`, "1", '{"url":"/reports/1.pdf"}'],
      ["progress", `${one!.part}.${one!.offset} #${one!.seq}`, "1", '{"done":0.5}'],
    ];
    await expect.poll(seen, { timeout: 10_000 }).toEqual(expected);
    expect(await panel.locator("select[name=outcomes-consumer]").evaluate((select: HTMLSelectElement) => select.value)).toBe("workers");
    // Its counters follow (the dead letter).
    await expect.poll(() => page.locator("tr[data-consumer=workers] td").nth(6).textContent(), { timeout: 10_000 }).toBe("1");
    await panel.locator("select[name=outcomes-kind]").selectOption("dead");
    expect(await seen()).toEqual([expected[0]]);
    await panel.locator("select[name=outcomes-kind]").selectOption("");
    await screenshots(page, "outcomes");

    // The connection dropped (the server restarted): it connects again after the last event it had, none twice.
    await env.server.restart();
    await env.admin.produce("reports", ["report 3"]);
    const [three] = await env.admin.lease("reports", "workers", { max: 1 });
    await env.admin.ack("reports", "workers", three!.lease, { results: { [three!.lease]: 3 } });
    const resumed = [["completed", `${three!.part}.${three!.offset} #${three!.seq}`, "1", "3"], ...expected];
    await expect.poll(seen, { timeout: 20_000 }).toEqual(resumed);

    // The tab hidden: the stream closes (as the polls stop); shown again, it resumes after the last event it had.
    const streams: string[] = [];
    page.on("request", (request) => void (request.url().includes("/events?") && streams.push(new URL(request.url()).search)));
    await setHidden(page, true);
    expect(await panel.locator(".stream-state").getAttribute("data-state")).toBe("paused");
    await env.admin.produce("reports", ["report 4"]);
    const [four] = await env.admin.lease("reports", "workers", { max: 1 });
    await env.admin.ack("reports", "workers", four!.lease, { results: { [four!.lease]: 4 } });
    await page.waitForTimeout(500);
    expect(await seen()).toEqual(resumed);
    await setHidden(page, false);
    await expect.poll(seen, { timeout: 10_000 }).toEqual([["completed", `${four!.part}.${four!.offset} #${four!.seq}`, "1", "4"], ...resumed]);
    // One stream made again, after the last event's cursor.
    expect(streams).toHaveLength(1);
    expect(streams[0]).toMatch(/^\?after=\d+$/);
    // Bounded: the newest 200 of them.
    await env.admin.produce(
      "reports",
      Array.from({ length: 200 }, (_, i) => `bulk ${i}`),
    );
    for (let batch = 0; batch < 2; batch++) {
      const leases = (await env.admin.lease("reports", "workers", { max: 100 })).map((m) => m.lease);
      await env.admin.ack("reports", "workers", leases);
    }
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(200);
    expect(await panel.locator("h2").textContent()).toBe("Outcomes (the last 200)");
    expect(await rows.nth(199).locator("td").nth(1).textContent()).toBe("completed");
    // Chromium itself logs the requests refused while the server was down: those are expected, nothing else.
    expect(problems.filter((p) => !/Failed to load resource: net::ERR_CONNECTION_REFUSED/.test(p))).toEqual([]);
    await context.close();
  }, 60_000);
});
