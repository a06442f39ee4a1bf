/**
 * The parts of Miniflare's, Playwright's, Redocly's and openapi-typescript's APIs the tests use, typed here: the packages come from
 * ./tools on first use (not from node_modules), so the project type-checks without them.
 */
import type { Readable } from "node:stream";

// --- miniflare

export interface MiniflareModule {
  type: "ESModule";
  path: string;
  contents?: string;
}

export interface MiniflareWorkerOptions {
  name?: string;
  modules?: MiniflareModule[];
  modulesRoot?: string;
  compatibilityDate?: string;
  compatibilityFlags?: string[];
  bindings?: Record<string, string>;
  durableObjects?: Record<string, string | { className: string; scriptName?: string; useSQLite?: boolean }>;
  kvNamespaces?: string[];
}

export interface MiniflareOptions extends MiniflareWorkerOptions {
  workers?: MiniflareWorkerOptions[];
  durableObjectsPersist?: string;
  host?: string;
  port?: number;
  handleRuntimeStdio?(stdout: Readable, stderr: Readable): void;
}

export interface Miniflare {
  /** The URL it serves on, once workerd runs. */
  readonly ready: Promise<URL>;
  dispatchFetch(url: string, init?: RequestInit): Promise<Response>;
  getDurableObjectNamespace(binding: string): Promise<unknown>;
  getWorker(name: string): Promise<unknown>;
  dispose(): Promise<void>;
}

export interface MiniflarePackage {
  Miniflare: new (options: MiniflareOptions) => Miniflare;
}

// --- playwright-core

type WaitState = { state?: "attached" | "detached" | "visible" | "hidden"; timeout?: number };
type LocatorFilter = { has?: Locator; hasText?: string | RegExp };

export interface Locator {
  click(options?: { timeout?: number }): Promise<void>;
  count(): Promise<number>;
  fill(value: string): Promise<void>;
  first(): Locator;
  nth(index: number): Locator;
  locator(selector: string, options?: LocatorFilter): Locator;
  getAttribute(name: string): Promise<string | null>;
  isVisible(): Promise<boolean>;
  textContent(): Promise<string | null>;
  allTextContents(): Promise<string[]>;
  selectOption(value: string | string[]): Promise<string[]>;
  waitFor(options?: WaitState): Promise<void>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as Playwright's own: the element's type is the caller's
  evaluate<R, A = undefined, E extends Element = any>(fn: (element: E, arg: A) => R | Promise<R>, arg?: A): Promise<R>;
  evaluateAll<R>(fn: (elements: Element[]) => R | Promise<R>): Promise<R>;
}

export interface Request {
  url(): string;
}

export interface Route {
  request(): Request;
  fulfill(response: { status?: number; json?: unknown; body?: string; contentType?: string; headers?: Record<string, string> }): Promise<void>;
  continue(): Promise<void>;
}

export interface ConsoleMessage {
  type(): string;
  text(): string;
}

export interface Page {
  goto(url: string, options?: { waitUntil?: "load" | "domcontentloaded" | "networkidle" | "commit"; timeout?: number }): Promise<unknown>;
  url(): string;
  locator(selector: string, options?: LocatorFilter): Locator;
  getByRole(role: string, options?: { name?: string | RegExp; exact?: boolean }): Locator;
  getByLabel(text: string | RegExp): Locator;
  waitForSelector(selector: string, options?: WaitState): Promise<unknown>;
  waitForTimeout(ms: number): Promise<void>;
  evaluate<R, A = undefined>(fn: (arg: A) => R | Promise<R>, arg?: A): Promise<R>;
  route(url: string, handler: (route: Route) => unknown): Promise<void>;
  unroute(url: string): Promise<void>;
  on(event: "console", listener: (message: ConsoleMessage) => void): void;
  on(event: "pageerror", listener: (error: Error) => void): void;
  on(event: "request", listener: (request: Request) => void): void;
  setViewportSize(size: { width: number; height: number }): Promise<void>;
  viewportSize(): { width: number; height: number } | null;
  screenshot(options?: { path?: string; fullPage?: boolean }): Promise<Uint8Array>;
  close(): Promise<void>;
}

export interface BrowserContext {
  newPage(): Promise<Page>;
  /** Cuts the pages of this context off the network (true) or back on. */
  setOffline(offline: boolean): Promise<void>;
  close(): Promise<void>;
}

export interface Browser {
  newContext(options?: {
    httpCredentials?: { username: string; password: string };
    colorScheme?: "light" | "dark";
    viewport?: { width: number; height: number };
  }): Promise<BrowserContext>;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

export interface PlaywrightPackage {
  chromium: { launch(options?: { executablePath?: string; args?: string[]; headless?: boolean }): Promise<Browser> };
}

// --- @apidevtools/swagger-parser (CommonJS: its class is the default export)

export interface SwaggerParserPackage {
  default: { validate(document: object): Promise<unknown> };
}

// --- @redocly/openapi-core

export interface LintProblem {
  ruleId: string;
  severity: "error" | "warn";
  message: string;
  location: { pointer?: string }[];
}

export interface RedoclyPackage {
  createConfig(config: { extends: string[] }): Promise<unknown>;
  lintFromString(options: { source: string; absoluteRef?: string; config: unknown }): Promise<LintProblem[]>;
}

// --- openapi-typescript

export interface OpenAPITypescriptPackage {
  /** The TypeScript nodes of the document's types. */
  default(schema: object): Promise<unknown[]>;
  astToString(ast: unknown[]): string;
}
