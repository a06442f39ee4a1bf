import { symlink, writeFile } from "node:fs/promises";
import { createJiti } from "jiti";
import { join } from "pathe";
import ts from "typescript";
import { H3 } from "h3";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { QueueWriter } from "../../src/writer/writer";
import { basic, startServer } from "./_server";
import { useTempDirs } from "../helpers/tmp";
import { importTool, toolModules } from "../helpers/tools";
import type { OpenAPITypescriptPackage, RedoclyPackage, SwaggerParserPackage } from "../helpers/tool-types";

const tempDir = useTempDirs("vq-openapi-");
/** The tests that take a tool install it on their first run (npm: the linter and openapi-typescript are about 20 MB each). */
const INSTALL_TIMEOUT = 300_000;

/**
 * A program written against the types openapi-typescript generates from the document, calling
 * the server through openapi-fetch: a produce and a consume, and two wrong calls the types must
 * refuse (never called).
 */
const CLIENT = `
import createClient from "openapi-fetch";
import type { paths } from "./schema";

export async function run(baseUrl: string) {
  const client = createClient<paths, "application/json">({ baseUrl });
  const produced = await client.POST("/api/v1/queues/{queue}/messages", { params: { path: { queue: "jobs" } }, body: { messages: ["a", "b"] } });
  if (!produced.data || !("first" in produced.data)) throw new Error(\`produce: \${produced.response.status} \${JSON.stringify(produced.error)}\`);
  const consumed = await client.GET("/api/v1/queues/{queue}/consumers/{consumer}/messages", {
    params: { path: { queue: "jobs", consumer: "worker" }, query: { max_messages: 10, timeout_ms: 0 } },
  });
  if (!consumed.data) throw new Error(\`consume: \${consumed.response.status} \${JSON.stringify(consumed.error)}\`);
  const listed = await client.GET("/api/v1/queues/{queue}/consumers", { params: { path: { queue: "jobs" } } });
  if (!listed.data) throw new Error(\`list: \${listed.response.status}\`);
  const kinds: ("ordered" | "shared")[] = listed.data.consumers.map((c) => c.kind);
  const data: string[] = consumed.data.messages.map((m) => m.data);
  const cursor: string | null = consumed.data.cursor;
  return { count: produced.data.count, part: produced.data.first.part, data, cursor, kinds };
}

export async function wrong(baseUrl: string): Promise<void> {
  const client = createClient<paths, "application/json">({ baseUrl });
  await client.GET("/api/v1/queues/{queue}/consumers/{consumer}/messages", {
    // @ts-expect-error max_messages is a number
    params: { path: { queue: "jobs", consumer: "worker" }, query: { max_messages: "ten" } },
  });
  // @ts-expect-error the envelope has no field "msg"
  await client.POST("/api/v1/queues/{queue}/messages", { params: { path: { queue: "jobs" } }, body: { msg: "x" } });
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
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const line = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start).line + 1 : 0;
    return `${d.file?.fileName ?? ""}:${line}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
  });
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
  it.each([false, true])(
    "is valid for swagger-parser (auth %s)",
    async (auth) => {
      const { default: SwaggerParser } = await importTool<SwaggerParserPackage>("@apidevtools/swagger-parser");
      await expect(SwaggerParser.validate(await servedDocument(auth))).resolves.toBeDefined();
    },
    INSTALL_TIMEOUT,
  );

  it.each([false, true])(
    "passes redocly lint with its recommended rules (auth %s)",
    async (auth) => {
      const doc = await servedDocument(auth);
      const { createConfig, lintFromString } = await importTool<RedoclyPackage>("@redocly/openapi-core");
      const config = await createConfig({ extends: ["recommended"] });
      const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: "openapi.json", config });
      expect(problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    },
    INSTALL_TIMEOUT,
  );

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

  it("describes every parameter, with its type", async () => {
    type Parameter = { name: string; in: string; description?: string; schema?: { type?: unknown; oneOf?: unknown } };
    type PathItem = { parameters?: Parameter[] } & Record<string, { parameters?: Parameter[] } | undefined>;
    const doc = (await servedDocument()) as unknown as { paths: Record<string, PathItem> };
    const parameters = Object.values(doc.paths).flatMap((item) => [
      ...(item.parameters ?? []),
      ...OPERATIONS.flatMap((method) => item[method]?.parameters ?? []),
    ]);
    expect(parameters.filter((p) => p.in === "query").map((p) => p.name)).toEqual(expect.arrayContaining(["max_messages", "timeout_ms", "commit", "cursor"]));
    for (const parameter of parameters) {
      expect(parameter.description, `${parameter.in} ${parameter.name}`).toMatch(/\w/);
      expect(parameter.schema?.type ?? parameter.schema?.oneOf, `${parameter.in} ${parameter.name}`).toBeDefined();
    }
  });

  it("lists the query parameters the routes read: each one given twice is refused by its route, by name", async () => {
    const s = await startServer();
    const doc = (await (await s.get("/api/v1/openapi.json")).json()) as {
      paths: Record<string, Record<string, { parameters?: { name: string; in: string }[] }>>;
    };
    let checked = 0;
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const method of OPERATIONS) {
        for (const { name } of (item[method]?.parameters ?? []).filter((p) => p.in === "query")) {
          const url = `${path.replace("{queue}", "q").replace("{consumer}", "c")}?${name}=1&${name}=1`;
          const res = await s.get(url, { method: method.toUpperCase(), ...(method === "get" ? {} : { body: "x", headers: { "content-type": "text/plain" } }) });
          const body = (await res.json()) as { error?: { code: string; message: string } };
          expect([res.status, body.error?.code], `${method} ${url}`).toEqual([400, "E_PARAM"]);
          expect(body.error?.message, `${method} ${url}`).toContain(name);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(16);
  });

  it(
    "generates a client (openapi-typescript, openapi-fetch) whose produce and consume type-check and work",
    async () => {
      const { default: openapiTS, astToString } = await importTool<OpenAPITypescriptPackage>("openapi-typescript");
      const s = await startServer();
      const dir = await tempDir();
      // The program's imports resolve as in a user's project: openapi-fetch from its node_modules.
      await symlink(toolModules("openapi-fetch"), join(dir, "node_modules"), "dir");
      const doc = (await (await s.get("/api/v1/openapi.json")).json()) as object;
      await writeFile(join(dir, "schema.ts"), astToString(await openapiTS(doc)));
      await writeFile(join(dir, "client.ts"), CLIENT);
      expect(typeCheck([join(dir, "client.ts")])).toEqual([]);
      // Without the expect-error marks, the wrong calls are type errors: on the lines marked, and nowhere else.
      await writeFile(join(dir, "wrong.ts"), CLIENT.replaceAll("// @ts-expect-error", "//"));
      const marked = CLIENT.split("\n").flatMap((line, i) => (line.includes("@ts-expect-error") ? [i + 2] : []));
      expect(typeCheck([join(dir, "wrong.ts")]).map((problem) => Number(/\.ts:(\d+): /.exec(problem)?.[1]))).toEqual(marked);
      // The same program, run (jiti strips its types) against the server.
      const client = await createJiti(import.meta.url).import<{ run(base: string): Promise<unknown> }>(join(dir, "client.ts"));
      expect(await client.run(s.url)).toEqual({ count: 2, part: 0, data: ["a", "b"], cursor: expect.any(String), kinds: ["ordered"] });
    },
    INSTALL_TIMEOUT,
  );

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

  it("names the headers its error answers carry: WWW-Authenticate on a 401, Retry-After on a 409 E_LOCKED", async () => {
    type Answer = { $ref?: string; headers?: Record<string, unknown> };
    type Doc = { components: { responses: Record<string, Answer> }; paths: Record<string, Record<string, { responses: Record<string, Answer> }>> };
    const s = await startServer({ auth: { users: [{ username: "u", password: "p" }] } });
    const doc = (await (await s.get("/api/v1/openapi.json", { headers: basic("u", "p") })).json()) as Doc;
    const headersOf = (answer: Answer) => {
      const resolved = answer.$ref ? doc.components.responses[answer.$ref.split("/").pop()!]! : answer;
      return Object.keys(resolved.headers ?? {}).map((name) => name.toLowerCase());
    };
    const refused = await s.get("/api/v1/queues");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/^Basic /);
    expect(headersOf(doc.paths["/api/v1/queues"]!.get!.responses["401"]!)).toContain("www-authenticate");
    // Same process, other driver instance: the pid lock is held, as by another process.
    const writer = await QueueWriter.open("held", { driver: fsDriver({ dir: s.dir }), durability: "none" });
    try {
      const locked = await s.post("/api/v1/queues/held/messages", "x", basic("u", "p"));
      expect(locked.status).toBe(409);
      expect(locked.headers.get("retry-after")).toMatch(/^\d+$/);
      expect(headersOf(doc.paths["/api/v1/queues/{queue}/messages"]!.post!.responses["409"]!)).toContain("retry-after");
      expect(headersOf(doc.paths["/api/v1/queues/{queue}/messages"]!.post!.responses["503"]!)).toContain("retry-after");
    } finally {
      await writer.close();
    }
  });

  it("names the server where the app is served: at the root, or under a host app's mount prefix", async () => {
    const handler = createQueueHandler({ driver: memoryDriver({}), durability: "none", logger: { error: () => {}, warn: () => {} } });
    try {
      type Doc = { servers: { url: string }[] };
      const root = (await (await handler.fetch(new Request("http://vq.local/api/v1/openapi.json"))).json()) as Doc;
      expect(root.servers.map((server) => server.url)).toEqual(["/"]);
      const host = new H3();
      host.mount("/vq", handler.app);
      const docURL = "http://vq.local/vq/api/v1/openapi.json";
      const mounted = (await (await host.fetch(new Request(docURL))).json()) as Doc;
      expect(mounted.servers.map((server) => server.url)).toEqual(["/vq"]);
      // As a client does: the server's URL resolved against the document's, then the path.
      const base = new URL(mounted.servers[0]!.url, docURL).href.replace(/\/$/, "");
      const res = await host.fetch(new Request(`${base}/api/v1/queues`));
      expect([res.status, await res.json()]).toEqual([200, { queues: [] }]);
    } finally {
      await handler.close();
    }
  });

  it("lists 403 and 404 only on the routes that name a queue: the others answer a user without rights, and never 404", async () => {
    type Doc = { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const s = await startServer({
      auth: {
        users: [
          { username: "u", password: "p" },
          { username: "none", password: "n", read: false, write: false },
        ],
      },
    });
    const doc = (await (await s.get("/api/v1/openapi.json", { headers: basic("u", "p") })).json()) as Doc;
    for (const path of ["/api/v1/queues", "/api/v1/overview", "/metrics", "/"]) {
      const res = await s.get(path, { headers: basic("none", "n") });
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
      expect(Object.keys(doc.paths[path]!.get!.responses), path).not.toContain("403");
      expect(Object.keys(doc.paths[path]!.get!.responses), path).not.toContain("404");
    }
    expect(Object.keys(doc.paths["/api/v1/queues/{queue}"]!.get!.responses)).toEqual(expect.arrayContaining(["400", "403", "404"]));
    expect((await s.get("/api/v1/queues/q", { headers: basic("none", "n") })).status).toBe(403);
  });

  it("describes the JSON answers as the routes give them: every field in the schema, every required one there", async () => {
    const s = await startServer();
    const doc = (await (await s.get("/api/v1/openapi.json")).json()) as DocWithSchemas;
    const problems: string[] = [];
    /** Calls a route and checks its JSON answer against the operation's schema for that status. */
    const call = async (method: string, path: string, route: string, body?: unknown): Promise<Record<string, unknown>> => {
      const init: RequestInit = body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { "content-type": "application/json" } };
      const res = await s.get(path, init);
      const answer = (await res.json()) as Record<string, unknown>;
      expect(res.status, `${method} ${path}: ${JSON.stringify(answer)}`).toBeLessThan(300);
      const schema = doc.paths[route]![method.toLowerCase()]!.responses[String(res.status)]!.content!["application/json"]!.schema;
      problems.push(...schemaProblems(answer, schema, doc, `${method} ${route} ${res.status}`));
      return answer;
    };
    const consumer = "/api/v1/queues/{queue}/consumers/{consumer}";
    await call("PUT", "/api/v1/queues/pq", "/api/v1/queues/{queue}", { partitions: 2 });
    await call("POST", "/api/v1/queues/pq/messages", "/api/v1/queues/{queue}/messages", { message: "p", partitionKey: "k" });
    await call("GET", "/api/v1/queues/pq", "/api/v1/queues/{queue}");
    await call("POST", "/api/v1/queues/q/messages", "/api/v1/queues/{queue}/messages", { messages: ["a", "b", "c"] });
    await call("POST", "/api/v1/queues/q/messages", "/api/v1/queues/{queue}/messages", { message: "later", delayMs: 60_000 });
    await call("GET", "/api/v1/queues/q/consumers/c/messages?max_messages=1&timeout_ms=0", `${consumer}/messages`);
    await call("POST", "/api/v1/queues/q/consumers/c/commit", `${consumer}/commit`);
    await call("POST", "/api/v1/queues/q/consumers/c/rewind", `${consumer}/rewind`);
    await call("POST", "/api/v1/queues/q/consumers/c/seek", `${consumer}/seek`, { to: "earliest" });
    const leased = await call("POST", "/api/v1/queues/q/consumers/s/lease", `${consumer}/lease`, { max: 3 });
    const [l0, l1, l2] = (leased.messages as { lease: string }[]).map((m) => m.lease);
    await call("POST", "/api/v1/queues/q/consumers/s/extend", `${consumer}/extend`, { leases: [l0], leaseMs: 60_000 });
    await call("POST", "/api/v1/queues/q/consumers/s/ack", `${consumer}/ack`, { leases: [l0, "0.0.99"] });
    await call("POST", "/api/v1/queues/q/consumers/s/nack", `${consumer}/nack`, { leases: [l1], deadLetter: true });
    await call("POST", "/api/v1/queues/q/consumers/s/nack", `${consumer}/nack`, { leases: [l2] });
    await call("POST", "/api/v1/queues/q.dead/redrive", "/api/v1/queues/{queue}/redrive", {});
    await call("GET", "/api/v1/queues", "/api/v1/queues");
    await call("GET", "/api/v1/queues/q", "/api/v1/queues/{queue}");
    await call("GET", "/api/v1/queues/q/consumers", "/api/v1/queues/{queue}/consumers");
    await call("GET", "/api/v1/queues/q/browse", "/api/v1/queues/{queue}/browse");
    await call("POST", "/api/v1/queues/q/prune", "/api/v1/queues/{queue}/prune");
    await call("POST", "/api/v1/queues/pq/prune", "/api/v1/queues/{queue}/prune");
    await call("POST", "/api/v1/queues/q/purge", "/api/v1/queues/{queue}/purge");
    await call("GET", "/api/v1/overview?history=2", "/api/v1/overview");
    await call("GET", "/api/v1/queues/q/overview?history=2", "/api/v1/queues/{queue}/overview");
    await call("GET", "/api/v1/queues/pq/overview", "/api/v1/queues/{queue}/overview");
    await call("DELETE", "/api/v1/queues/q/consumers/c", consumer);
    await call("DELETE", "/api/v1/queues/q.dead", "/api/v1/queues/{queue}");
    await call("GET", "/health", "/health");
    expect(problems).toEqual([]);
  });

  it("lists the media types a consume answers in, whichever the client accepts", async () => {
    const s = await startServer();
    const doc = (await (await s.get("/api/v1/openapi.json")).json()) as DocWithSchemas;
    const listed = Object.keys(doc.paths["/api/v1/queues/{queue}/consumers/{consumer}/messages"]!.get!.responses["200"]!.content!);
    await s.post("/api/v1/queues/q/messages", "x");
    for (const accept of ["application/json", "application/vnd.v-queue.batch", "application/octet-stream", "*/*"]) {
      const res = await s.get("/api/v1/queues/q/consumers/c/messages?timeout_ms=0", { headers: { accept } });
      expect(res.status, accept).toBe(200);
      await res.arrayBuffer();
      expect(listed, accept).toContain(res.headers.get("content-type")!.split(";")[0]);
    }
  });
});

type Schema = {
  $ref?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  allOf?: Schema[];
  oneOf?: Schema[];
  anyOf?: Schema[];
};
type DocWithSchemas = {
  components: { schemas: Record<string, Schema> };
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: Schema }> }> }>>;
};

/** Where `value` and `schema` disagree: a field the schema does not declare, or a required one missing (through $ref, allOf, oneOf, items). */
function schemaProblems(value: unknown, schema: Schema, doc: DocWithSchemas, at: string): string[] {
  const resolve = (s: Schema): Schema => (s.$ref ? resolve(doc.components.schemas[s.$ref.split("/").pop()!]!) : s);
  const own = resolve(schema);
  if (Array.isArray(value))
    return own.items ? value.flatMap((item, i) => schemaProblems(item, own.items!, doc, `${at}[${i}]`)) : [`${at}: an array the schema does not describe`];
  if (value === null || typeof value !== "object") return [];
  const parts = [own, ...[...(own.allOf ?? []), ...(own.oneOf ?? []), ...(own.anyOf ?? [])].map(resolve)];
  const properties: Record<string, Schema> = Object.assign({}, ...parts.map((part) => part.properties ?? {}));
  const required = [...(own.required ?? []), ...(own.allOf ?? []).flatMap((part) => resolve(part).required ?? [])];
  return [
    ...Object.entries(value).flatMap(([key, field]) =>
      properties[key] ? schemaProblems(field, properties[key], doc, `${at}.${key}`) : [`${at}.${key}: not in the schema`],
    ),
    ...required.filter((key) => !(key in value)).map((key) => `${at}.${key}: required, missing`),
  ];
}
