import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach } from "vitest";
import { serveQueues, type QueueServer, type ServeOptions } from "../../adapters/server";

export interface TestServer extends QueueServer {
  /** The data directory (inside `root`). */
  dir: string;
  /** A temp root holding only `dir`: anything else appearing here escaped the data directory. */
  root: string;
  get(path: string, init?: RequestInit): Promise<Response>;
  post(path: string, body?: BodyInit, headers?: Record<string, string>): Promise<Response>;
  del(path: string, init?: RequestInit): Promise<Response>;
}

const started: TestServer[] = [];

/** A real server on 127.0.0.1 (random port) over a fresh temp data dir; closed and removed after each test. */
export async function startServer(options: ServeOptions = {}): Promise<TestServer> {
  const root = mkdtempSync(join(tmpdir(), "vq-http-"));
  const dir = join(root, "data");
  const server = await serveQueues({ dir, port: 0, durability: "none", syncCommits: false, ...options, logger: { error: () => {}, warn: () => {} } });
  const call = (path: string, init?: RequestInit) => fetch(server.url + path, init);
  const test: TestServer = Object.assign(server, {
    dir,
    root,
    get: (path: string, init?: RequestInit) => call(path, init),
    post: (path: string, body?: BodyInit, headers: Record<string, string> = {}) => call(path, { method: "POST", body, headers }),
    del: (path: string, init?: RequestInit) => call(path, { ...init, method: "DELETE" }),
  });
  started.push(test);
  return test;
}

async function stopAll(): Promise<void> {
  for (const s of started.splice(0)) {
    await s.close();
    rmSync(s.root, { recursive: true, force: true });
  }
}

afterEach(stopAll);
afterAll(stopAll);

export const basic = (user: string, pass: string): Record<string, string> => ({ authorization: `Basic ${btoa(`${user}:${pass}`)}` });

export const jsonHeaders = { "content-type": "application/json" };

/** Reads a JSON error body and returns its code. */
export async function errorCode(res: Response): Promise<string> {
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  if (typeof body.error?.message !== "string") throw new Error(`not an error body: ${JSON.stringify(body)}`);
  return body.error.code ?? "";
}
