import { writeFileSync } from "node:fs";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { useTempDirs } from "../helpers/tmp";
import { startCli, until, ANSI } from "./_cli";

const tempDir = useTempDirs("vq-cli-log-");
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` });
const SECRET_BODY = "card-4111-1111";

describe("request log of the HTTP app (logRequests)", () => {
  it("info: one line per request that changes state; warn: refused logins and rights; debug: the rest", async () => {
    const logged: Record<"error" | "warn" | "info" | "debug", string[]> = { error: [], warn: [], info: [], debug: [] };
    const logger = Object.fromEntries(
      Object.keys(logged).map((level) => [level, (...args: unknown[]) => logged[level as keyof typeof logged].push(args.join(" "))]),
    ) as unknown as Console;
    const handler = createQueueHandler({
      driver: memoryDriver({ name: `log-${Math.random()}` }),
      auth: {
        users: [
          { username: "admin", password: "pw-admin" },
          { username: "reader", password: "pw-reader", write: false },
        ],
      },
      logRequests: true,
      logger,
    });
    const request = (path: string, init: RequestInit = {}) => handler.fetch(new Request(`http://localhost${path}`, init));
    const admin = basic("admin", "pw-admin");
    const q = "/api/v1/queues/orders";
    try {
      expect((await request(`${q}/messages`, { method: "POST", body: SECRET_BODY, headers: admin })).status).toBe(201);
      const consumed = await request(`${q}/consumers/c/messages?max_messages=10`, { headers: admin });
      const { cursor } = (await consumed.json()) as { cursor: string };
      expect((await request(`${q}/consumers/c/commit?cursor=${cursor}`, { method: "POST", headers: admin })).status).toBe(200);
      expect((await request(`${q}/consumers/c/rewind`, { method: "POST", headers: admin })).status).toBe(200);
      expect((await request(`${q}/consumers/c/messages?commit=${cursor}`, { headers: admin })).status).toBe(200);
      expect((await request(`${q}/consumers/c`, { method: "DELETE", headers: admin })).status).toBe(200);
      expect((await request(`${q}/messages`, { method: "POST", body: SECRET_BODY, headers: basic("admin", "wrong-pass") })).status).toBe(401);
      expect((await request(`${q}/messages`, { method: "POST", body: SECRET_BODY, headers: basic("reader", "pw-reader") })).status).toBe(403);
      expect((await request("/health")).status).toBe(200);
    } finally {
      await handler.close();
    }
    const shape = (method: string, path: string, status: number, user: string) =>
      new RegExp(`^\\[v-queue\\] ${method} ${path.replace(/[.?]/g, "\\$&")} ${status} \\d+\\.\\d ms user="${user}" ip=`);
    expect(logged.info).toHaveLength(5);
    expect(logged.info[0]).toMatch(shape("POST", `${q}/messages`, 201, "admin"));
    expect(logged.info[1]).toMatch(shape("POST", `${q}/consumers/c/commit`, 200, "admin"));
    expect(logged.info[2]).toMatch(shape("POST", `${q}/consumers/c/rewind`, 200, "admin"));
    expect(logged.info[3]).toMatch(shape("GET", `${q}/consumers/c/messages`, 200, "admin"));
    expect(logged.info[4]).toMatch(shape("DELETE", `${q}/consumers/c`, 200, "admin"));
    expect(logged.warn).toHaveLength(2);
    expect(logged.warn[0]).toMatch(/^\[v-queue\] auth failed: POST \/api\/v1\/queues\/orders\/messages 401 .* user="admin"/);
    expect(logged.warn[1]).toMatch(/^\[v-queue\] forbidden: POST \/api\/v1\/queues\/orders\/messages 403 .* user="reader"/);
    // The consume without commit and /health: debug only.
    expect(logged.debug).toHaveLength(2);
    const all = Object.values(logged).flat().join("\n");
    for (const secret of [SECRET_BODY, "pw-admin", "wrong-pass", "pw-reader", "Basic "]) expect(all).not.toContain(secret);
  });

  it("is off by default", async () => {
    const lines: unknown[] = [];
    const push = (...args: unknown[]) => void lines.push(args);
    const handler = createQueueHandler({
      driver: memoryDriver({ name: `log-${Math.random()}` }),
      logger: { error: push, warn: push, info: push, debug: push } as unknown as Console,
    });
    await handler.fetch(new Request("http://localhost/api/v1/queues/q/messages", { method: "POST", body: "x" }));
    await handler.close();
    expect(lines).toEqual([]);
  });
});

describe("v-queue serve", () => {
  it("logs produces (info) and refused logins (warn) with user, address, status and time, and no body or password", async () => {
    const root = await tempDir();
    writeFileSync(join(root, "conf.json"), JSON.stringify({ auth: { users: [{ username: "admin", password: "pw-admin" }] } }));
    const run = startCli(["serve", "--port", "0", "--dir", join(root, "data"), "--config", join(root, "conf.json"), "--durability", "none"]);
    try {
      const started = await until(run.output, (r) => /on http:\/\/127\.0\.0\.1:\d+/.test(r.stdout + r.stderr));
      const url = /on (http:\/\/127\.0\.0\.1:\d+)/.exec(started.stdout + started.stderr)![1]!;
      expect((await fetch(`${url}/api/v1/queues/orders/messages`, { method: "POST", body: SECRET_BODY, headers: basic("admin", "pw-admin") })).status).toBe(
        201,
      );
      expect((await fetch(`${url}/api/v1/queues/orders/messages`, { method: "POST", body: SECRET_BODY, headers: basic("admin", "nope-nope") })).status).toBe(
        401,
      );
      const out = await until(run.output, (r) => /auth failed/.test(r.stdout + r.stderr));
      const text = out.stdout + out.stderr;
      expect(text).toMatch(/POST \/api\/v1\/queues\/orders\/messages 201 \d+\.\d ms user="admin" ip=(::ffff:)?127\.0\.0\.1/);
      expect(text).toMatch(/auth failed: POST \/api\/v1\/queues\/orders\/messages 401 \d+\.\d ms user="admin" ip=/);
      for (const secret of [SECRET_BODY, "pw-admin", "nope-nope"]) expect(text).not.toContain(secret);
      expect(text).not.toMatch(ANSI);
    } finally {
      run.child.kill("SIGTERM");
      await run.exited;
    }
  });
});
