/**
 * What the dashboard's browser tests share: Chromium, a page that records every console error
 * and page error, and screenshots at laptop and phone width into test/.artifacts/.
 */
import { existsSync, mkdirSync } from "node:fs";
import { resolve } from "pathe";
import { afterAll, beforeAll } from "vitest";
import { createClient, type VQueueClient } from "../../client/index";
import { startServerProcess, type ServerProcess } from "../client/_server-process";
import type { Browser, BrowserContext, Page, PlaywrightPackage } from "../helpers/tool-types";
import { importTool } from "../helpers/tools";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const HAS_CHROMIUM = existsSync(CHROMIUM);
export const ARTIFACTS = resolve(import.meta.dirname, "../.artifacts");

export const LAPTOP = { width: 1366, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** Chromium through playwright-core (installed by ./tools on first use). */
export async function launch(): Promise<Browser> {
  const { chromium } = await importTool<PlaywrightPackage>("playwright-core");
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/** What a file's dashboard tests share: the standalone server, Chromium, and a client of the server's admin. */
export interface DashboardSetup {
  server: ServerProcess;
  browser: Browser;
  admin: VQueueClient;
}

/**
 * Starts the standalone server (`v-queue serve`, its own process) with `config`, Chromium and a
 * client as `admin` before the file's tests, and stops them after. Without Chromium nothing is
 * started (the tests skip), except on CI, where that is an error.
 */
export function useDashboardServer(config: Record<string, unknown>, admin: { username: string; password: string }): DashboardSetup {
  const setup = {} as DashboardSetup;
  beforeAll(async () => {
    if (!HAS_CHROMIUM) {
      if (process.env.CI) throw new Error("Chromium not found: install Debian's chromium package (.ci/run does).");
      return;
    }
    setup.server = await startServerProcess(config);
    setup.admin = createClient({ baseURL: setup.server.url, auth: admin });
    setup.browser = await launch();
  }, 60_000);
  afterAll(async () => {
    await setup.browser?.close();
    await setup.server?.remove();
  });
  return setup;
}

export interface WatchedPage {
  context: BrowserContext;
  page: Page;
  /** Console errors and warnings, and uncaught page errors, as text. */
  problems: string[];
}

/** A new context (its own credentials) and page, every console error and page error recorded. */
export async function openPage(
  browser: Browser,
  options: { credentials?: { username: string; password: string }; colorScheme?: "light" | "dark"; viewport?: { width: number; height: number } } = {},
): Promise<WatchedPage> {
  const context = await browser.newContext({
    httpCredentials: options.credentials,
    colorScheme: options.colorScheme ?? "light",
    viewport: options.viewport ?? LAPTOP,
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") problems.push(`console.${message.type()}: ${message.text()}`);
  });
  page.on("pageerror", (error) => problems.push(`pageerror: ${error.message}`));
  return { context, page, problems };
}

/** Makes the page take its tab for hidden (or shown again), as switching tabs does: `document.hidden` and a `visibilitychange`. */
export function setHidden(page: Page, hidden: boolean): Promise<void> {
  return page.evaluate((value) => {
    Object.defineProperty(document, "hidden", { configurable: true, get: () => value });
    document.dispatchEvent(new Event("visibilitychange"));
  }, hidden);
}

/**
 * Screenshots of the page as it is now, at laptop then phone width (the viewport is put back):
 * the whole page, or only the window with `window` (a page of 1,000 rows is tens of thousands of
 * pixels tall at phone width: its capture took over 30 s on a loaded machine).
 */
export async function screenshots(page: Page, name: string, { window = false }: { window?: boolean } = {}): Promise<void> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const before = page.viewportSize() ?? LAPTOP;
  for (const [label, size] of [
    ["1366", LAPTOP],
    ["390", PHONE],
  ] as const) {
    await page.setViewportSize(size);
    await page.waitForTimeout(250);
    // The whole page at that width (what scrolls below the window too), unless told the window.
    await page.screenshot({ path: resolve(ARTIFACTS, `dashboard-${name}-${label}.png`), fullPage: !window });
  }
  await page.setViewportSize(before);
}
