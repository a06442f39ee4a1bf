import { afterAll, expect, it } from "vitest";
import type { Browser } from "../helpers/tool-types";
import { createClient } from "../../client/index";
import { partitionOfKey } from "../../src/partitions/declaration";
import { startServer } from "../http/_server";
import { launch, openPage } from "../browser/_dashboard";

let browser: Browser | undefined;
afterAll(async () => browser?.close());

it("a partitioned queue: the browser reads every partition or one, each message saying its partition; its page lists its partitions and their dead letters; seek offers no part and seq", async () => {
  const s = await startServer({ queues: { events: { partitions: 3 } }, monitor: { sampleMs: 200 } });
  const client = createClient({ baseURL: s.url });
  for (const key of ["a", "b", "c", "d", "e", "f"]) await client.produce("events", [`${key}1`, `${key}2`], { partitionKey: key });
  await client.consume("events", "reader", { maxMessages: 1 }).then((r) => client.commit("events", "reader", r.cursor));
  browser = await launch();
  const { page, problems } = await openPage(browser);

  await page.goto(`${s.url}/#/queues/events/browse`);
  await expect.poll(() => page.locator(".message").count(), { timeout: 10_000 }).toBe(12);
  const headers = await page.locator(".message header").allTextContents();
  for (const text of headers) expect(text).toMatch(/partition [0-2] · part 0/);
  const options = await page.locator("select[name=partition] option").allTextContents();
  expect(options).toEqual(["Every partition in turn", "Partition 0", "Partition 1", "Partition 2"]);

  // One partition alone, in pages of 10 (what it holds, whatever the count), then part and seq within it.
  const one = partitionOfKey("c", 3);
  const holds = ["a", "b", "c", "d", "e", "f"].filter((key) => partitionOfKey(key, 3) === one).length * 2;
  await page.locator("select[name=partition]").selectOption(String(one));
  await page.getByRole("button", { name: "Show" }).click();
  await expect.poll(() => page.locator(".message").count()).toBe(holds);
  for (const text of await page.locator(".message header").allTextContents()) expect(text).toContain(`partition ${one} ·`);
  await page.locator("#browse-from").selectOption("seq");
  await page.locator("input[name=seq]").fill(String(holds));
  await page.getByRole("button", { name: "Show" }).click();
  await expect.poll(() => page.locator(".message").count()).toBe(1);

  // The queue's page: its partitions (each linked to its own page), no parts of its own, and its partitions' dead-letter queues.
  const leased = await client.lease("events", "workers", { max: 1 });
  await client.nack(
    "events",
    "workers",
    leased.map((m) => m.lease),
    { deadLetter: true, error: "bad" },
  );
  const dead = `events.p${leased[0]!.partition}.dead`;
  await page.goto(`${s.url}/#/queues/events`);
  await expect.poll(() => page.locator("table[aria-label=Partitions] tbody tr").count(), { timeout: 10_000 }).toBe(3);
  expect(await page.locator("table[aria-label=Parts]").isVisible()).toBe(false);
  // A partition never written is listed too, without a link (it has no page yet).
  const written = [...new Set(["a", "b", "c", "d", "e", "f"].map((key) => partitionOfKey(key, 3)))].sort();
  const links = await page.locator("table[aria-label=Partitions] tbody a").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("href")));
  expect(links).toEqual(written.map((k) => `#/queues/events.p${k}`));
  const messagesShown = await page.locator("table[aria-label=Partitions] tbody tr").evaluateAll((rows) => rows.map((r) => Number(r.children[1]!.textContent)));
  expect(messagesShown.reduce((a, b) => a + b, 0)).toBe(12);
  await expect.poll(() => page.locator(".dlq a").allTextContents(), { timeout: 10_000 }).toEqual([dead]);
  // Its shared consumer's outcomes: each message named with its partition (partition:part.offset).
  const [m] = leased;
  await expect
    .poll(() => page.locator("section.outcomes tr[data-kind] .place").allTextContents(), { timeout: 10_000 })
    .toEqual([`${m!.partition}:${m!.part}.${m!.offset} #${m!.seq}`]);

  // The consumer's seek: a cursor names partitions; part and seq are not offered.
  await page.locator("button[data-action=seek]").first().click();
  const kinds = await page.locator("dialog[open] select[name=to] option").evaluateAll((nodes) => nodes.map((n) => n.getAttribute("value")));
  expect(kinds).toEqual(["earliest", "latest", "cursor", "time"]);
  expect(problems).toEqual([]);
}, 30_000);
