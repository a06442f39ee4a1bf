import { writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";
import { join } from "pathe";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { startServer } from "./_server";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-openapi-");

/**
 * A client written against the types openapi-typescript generates from the document: a
 * produce and a consume, and two wrong calls the types must refuse (never called).
 */
const CLIENT = `
import type { operations } from "./schema";

type Params<K extends keyof operations> = operations[K]["parameters"];
type JsonBody<K extends keyof operations> = operations[K]["requestBody"] extends { content: { "application/json": infer B } } | undefined ? B : never;
type Answer<K extends keyof operations, S extends keyof operations[K]["responses"]> = operations[K]["responses"][S] extends { content: { "application/json": infer A } } ? A : never;

async function call<T>(url: string, init?: RequestInit): Promise<T> {
  const res = await fetch(url, init);
  if (!res.ok) throw new Error(\`\${res.status}: \${await res.text()}\`);
  return (await res.json()) as T;
}

export function produce(base: string, path: Params<"produce">["path"], body: JsonBody<"produce">): Promise<Answer<"produce", 201>> {
  return call(\`\${base}/api/v1/queues/\${path.queue}/messages\`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
}

export function consume(base: string, path: Params<"consume">["path"], query: NonNullable<Params<"consume">["query"]>): Promise<Answer<"consume", 200>> {
  const search = new URLSearchParams(Object.entries(query).map(([k, v]) => [k, String(v)]));
  return call(\`\${base}/api/v1/queues/\${path.queue}/consumers/\${path.consumer}/messages?\${search}\`);
}

export function listConsumers(base: string, path: Params<"listConsumers">["path"]): Promise<Answer<"listConsumers", 200>> {
  return call(\`\${base}/api/v1/queues/\${path.queue}/consumers\`);
}

export async function run(base: string): Promise<{ count: number; part: number; data: string[]; cursor: string | null; kinds: ("ordered" | "shared")[] }> {
  const written = await produce(base, { queue: "jobs" }, { messages: ["a", "b"] });
  const got = await consume(base, { queue: "jobs", consumer: "worker" }, { max_messages: 10, timeout_ms: 0 });
  const { consumers } = await listConsumers(base, { queue: "jobs" });
  return { count: written.count, part: written.first.part, data: got.messages.map((m) => m.data), cursor: got.cursor, kinds: consumers.map((c) => c.kind) };
}

export async function wrong(base: string): Promise<void> {
  // @ts-expect-error max_messages is a number
  await consume(base, { queue: "jobs", consumer: "worker" }, { max_messages: "ten" });
  // @ts-expect-error the envelope has no field "msg"
  await produce(base, { queue: "jobs" }, { msg: "x" });
}
`;

/** The diagnostics of type-checking `files` and what they import (strict, as a user's project would; the generated schema is a .ts among them). */
function typeCheck(files: string[]): string[] {
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"],
    types: [],
    skipLibCheck: true,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ""}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`);
}

type OpenAPIDocument = { paths: Record<string, Record<string, { operationId?: string }>> };

/** The served document, with auth on (the `basic` scheme applied; /metrics open, without it) or off. */
async function servedDocument(auth = false): Promise<OpenAPIDocument> {
  const s = await startServer(auth ? { auth: { users: [{ username: "u", password: "p" }] }, metrics: { open: true } } : {});
  const res = await s.get("/api/v1/openapi.json", auth ? { headers: { authorization: `Basic ${btoa("u:p")}` } } : undefined);
  expect(res.status).toBe(200);
  return (await res.json()) as OpenAPIDocument;
}

const OPERATIONS = ["get", "put", "post", "delete"];

describe("the OpenAPI document", () => {
  it.each([false, true])("passes redocly lint with its recommended rules (auth %s)", async (auth) => {
    const doc = await servedDocument(auth);
    const config = await createConfig({ extends: ["recommended"] });
    const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: "openapi.json", config });
    expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  });

  it("asks for Basic credentials where the server does, and nowhere else", async () => {
    type Op = { security?: unknown[]; responses: Record<string, unknown> };
    const on = (await servedDocument(true)) as unknown as { security: unknown[]; paths: Record<string, Record<string, Op>> };
    expect(on.security).toEqual([{ basic: [] }]);
    for (const path of ["/health", "/metrics"]) {
      expect(on.paths[path]!.get!.security, path).toEqual([]);
      expect(on.paths[path]!.get!.responses, path).not.toHaveProperty("401");
    }
    expect(on.paths["/api/v1/queues"]!.get!.security).toBeUndefined();
    expect(on.paths["/api/v1/queues"]!.get!.responses).toHaveProperty("401");
    const off = (await servedDocument(false)) as unknown as { security: unknown[]; components: object; paths: Record<string, Record<string, Op>> };
    expect(off.security).toEqual([]);
    expect(off.components).not.toHaveProperty("securitySchemes");
    expect(off.paths["/api/v1/queues"]!.get!.responses).not.toHaveProperty("401");
  });

  it("gives every operation of the route table its own operationId", async () => {
    const doc = await servedDocument();
    const ids = Object.values(doc.paths).flatMap((item) => OPERATIONS.filter((method) => item[method]).map((method) => item[method]!.operationId));
    expect(ids.length).toBeGreaterThan(20);
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("generates a client (openapi-typescript) whose produce and consume type-check and work", async () => {
    const s = await startServer();
    const dir = await tempDir();
    const doc = await (await s.get("/api/v1/openapi.json")).json();
    await writeFile(join(dir, "schema.ts"), astToString(await openapiTS(doc)));
    await writeFile(join(dir, "client.ts"), CLIENT);
    expect(typeCheck([join(dir, "client.ts")])).toEqual([]);
    // Without the expect-error marks, the wrong calls are type errors.
    await writeFile(join(dir, "wrong.ts"), CLIENT.replaceAll("// @ts-expect-error", "//"));
    expect(typeCheck([join(dir, "wrong.ts")])).toHaveLength(2);
    // The same client, its types erased, against the server.
    await writeFile(
      join(dir, "client.mjs"),
      ts.transpileModule(CLIENT, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText,
    );
    const client = (await import(pathToFileURL(join(dir, "client.mjs")).href)) as { run(base: string): Promise<unknown> };
    expect(await client.run(s.url)).toEqual({ count: 2, part: 0, data: ["a", "b"], cursor: expect.any(String), kinds: ["ordered"] });
  }, 60_000);

  it("lists the error answers the routes really give", async () => {
    const s = await startServer();
    const doc = (await (await s.get("/api/v1/openapi.json")).json()) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const big = JSON.stringify({ cursor: "x".repeat(5000) });
    const cases: [method: string, path: string, route: string, init: RequestInit][] = [
      [
        "POST",
        "/api/v1/queues/q/consumers/c/ack",
        "/api/v1/queues/{queue}/consumers/{consumer}/ack",
        { body: "leases", headers: { "content-type": "text/plain" } },
      ],
      [
        "POST",
        "/api/v1/queues/q/consumers/c/lease",
        "/api/v1/queues/{queue}/consumers/{consumer}/lease",
        { body: "{}", headers: { "content-type": "text/plain" } },
      ],
      ["POST", "/api/v1/queues/q/consumers/c/commit", "/api/v1/queues/{queue}/consumers/{consumer}/commit", { body: big }],
      ["POST", "/api/v1/queues/q/consumers/c/seek", "/api/v1/queues/{queue}/consumers/{consumer}/seek", { body: big }],
      ["POST", "/api/v1/queues/q/prune", "/api/v1/queues/{queue}/prune", { body: big }],
      ["PUT", "/api/v1/queues/q", "/api/v1/queues/{queue}", { body: big }],
    ];
    for (const [method, path, route, init] of cases) {
      const res = await s.get(path, { ...init, method });
      expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expect(Object.keys(doc.paths[route]![method.toLowerCase()]!.responses), `${method} ${path}`).toContain(String(res.status));
    }
    // A closing app refuses what comes in: 503 E_SHUTDOWN.
    const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none", logger: { error: () => {}, warn: () => {} } });
    const closing = handler.close();
    const res = await handler.fetch(new Request("http://vq.local/api/v1/queues"));
    await closing;
    expect(res.status).toBe(503);
    expect(Object.keys(doc.paths["/api/v1/queues"]!.get!.responses)).toContain("503");
  });
});
