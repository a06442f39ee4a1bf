import { readdirSync } from "node:fs";
import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { BATCH_CONTENT_TYPE } from "../../runtime/index";
import { errorCode, jsonHeaders, startServer, type TestServer } from "./_server";

/** Sends a raw request line (no client-side URL normalisation), like curl --path-as-is. */
function rawGet(s: TestServer, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port: s.port, path, method: "GET" }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** The temp root must hold only the data dir; the data dir only what the test made. */
function expectNothingOutside(s: TestServer): void {
  expect(readdirSync(s.root)).toEqual(["data"]);
}

describe("bad input gets a 4xx JSON error and touches nothing outside the data directory", () => {
  it("rejects path names with encoded .., /, NUL, bad characters and bad percent-encoding", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/ok/messages", "x");
    const names = [
      "..",
      "%2e%2e",
      "%2E%2E",
      "a%2Fb",
      "..%2F..%2Fetc",
      "%2e%2e%2f%2e%2e%2fescape",
      "a%00b",
      "a%20b",
      "a%3Bb",
      "%C3%A9",
      "x".repeat(129),
      "%E0%A4%A",
      "%",
    ];
    for (const name of names) {
      for (const path of [`/api/v1/queues/${name}`, `/api/v1/queues/${name}/consumers/c/messages`, `/api/v1/queues/ok/consumers/${name}/messages`]) {
        const res = await rawGet(s, path);
        expect(res.status, path).toBeGreaterThanOrEqual(400);
        expect(res.status, path).toBeLessThan(500);
        expect(JSON.parse(res.body).error.code, path).toMatch(/^E_(NAME|ROUTE|PARAM|METHOD)$/);
      }
      const res = await s.post(`/api/v1/queues/${name}/messages`, "escape");
      expect(res.status, name).toBeGreaterThanOrEqual(400);
      expect(res.status, name).toBeLessThan(500);
    }
    expect((await rawGet(s, "/api/v1/queues/a%2Fb")).body).toContain("E_NAME");
    expect(readdirSync(s.dir).sort()).toEqual(["ok-0", "ok_info_queue", "ok_queue.lock"].sort());
    expectNothingOutside(s);
  });

  it("rejects negative, fractional, huge and repeated numbers", async () => {
    const s = await startServer();
    await s.post("/api/v1/queues/q/messages", "x");
    for (const query of [
      "max_messages=-1",
      "max_messages=0",
      "max_messages=1.5",
      "max_messages=abc",
      "max_messages=10001",
      "max_messages=99999999999999999999",
      "max_messages=1&max_messages=2",
      "timeout_ms=-5",
      "timeout_ms=60001",
      "timeout_ms=1e3",
      "max_messages=",
    ]) {
      const res = await s.get(`/api/v1/queues/q/consumers/c/messages?${query}`);
      expect(res.status, query).toBe(400);
      expect(await errorCode(res)).toBe("E_PARAM");
    }
    // Bounds themselves are fine.
    expect((await s.get("/api/v1/queues/q/consumers/c/messages?max_messages=10000&timeout_ms=0")).status).toBe(200);
  });

  it("refuses bodies over the limit with 413, by content-length and while streaming (chunked)", async () => {
    const s = await startServer({ limits: { maxBodyBytes: 1024 } });
    let res = await s.post("/api/v1/queues/q/messages", "x".repeat(1025), { "content-type": "text/plain" });
    expect(res.status).toBe(413);
    expect(await errorCode(res)).toBe("E_TOO_LARGE");
    // A large body (4 MiB) with no content-length, streamed in chunks.
    const chunk = new Uint8Array(64 * 1024);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 64) return controller.close();
        sent++;
        controller.enqueue(chunk);
      },
    });
    res = await fetch(`${s.url}/api/v1/queues/q/messages`, {
      method: "POST",
      body: stream,
      duplex: "half",
      headers: { "content-type": "application/octet-stream" },
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await errorCode(res)).toBe("E_TOO_LARGE");
    expect((await s.post("/api/v1/queues/q/messages", "x".repeat(1024), { "content-type": "text/plain" })).status).toBe(201);
    const q = await (await s.get("/api/v1/queues/q")).json();
    expect(q.messages).toBe(1);
  });

  it("validates JSON bodies, base64, binary batches, UTF-8 text and cursors", async () => {
    const s = await startServer({ limits: { maxBatchMessages: 3 } });
    const bad: [BodyInit, Record<string, string>, number][] = [
      ["{not json", jsonHeaders, 400],
      ['["a"]', jsonHeaders, 400],
      ['"a"', jsonHeaders, 400],
      ['{"messages":"a"}', jsonHeaders, 400],
      ['{"message":"a","messages":["b"]}', jsonHeaders, 400],
      ['{"msg":"a"}', jsonHeaders, 400],
      ['{"messages":[]}', jsonHeaders, 400],
      ['{"messages":["a","b","c","d"]}', jsonHeaders, 413],
      ['{"message":"a","encoding":"hex"}', jsonHeaders, 400],
      ['{"message":"not base64!","encoding":"base64"}', jsonHeaders, 400],
      ['{"message":12,"encoding":"base64"}', jsonHeaders, 400],
      [new Uint8Array([0xff, 0xfe]), { "content-type": "text/plain" }, 400],
      [new Uint8Array([1, 2, 3]), { "content-type": BATCH_CONTENT_TYPE }, 400],
      [new Uint8Array([0x56, 0x51, 0x42, 0x31, 1, 0, 0, 0]), { "content-type": BATCH_CONTENT_TYPE }, 400],
      [new Uint8Array([0x56, 0x51, 0x42, 0x31, 9, 9, 9, 9]), { "content-type": BATCH_CONTENT_TYPE }, 413],
    ];
    for (const [body, headers, status] of bad) {
      const res = await s.post("/api/v1/queues/q/messages", body, headers);
      expect(res.status, String(body)).toBe(status);
      expect(await errorCode(res)).toMatch(/^E_(BODY|TOO_LARGE)$/);
    }
    expect((await s.get("/api/v1/queues/q")).status).toBe(404);

    await s.post("/api/v1/queues/q/messages", "x");
    await s.get("/api/v1/queues/q/consumers/c/messages");
    for (const [body, headers] of [
      ["{bad", jsonHeaders],
      ['{"cursor":5}', jsonHeaders],
      ["1.2", { "content-type": "text/plain" }],
      ["-1.0.0", {}],
      ['["0.1.1"]', jsonHeaders],
    ] as [string, Record<string, string>][]) {
      const res = await s.post("/api/v1/queues/q/consumers/c/commit", body, headers);
      expect(res.status, body).toBe(400);
    }
    const res = await s.post("/api/v1/queues/q/consumers/c/commit?cursor=a.b.c");
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("E_PARAM");
    expectNothingOutside(s);
  });

  it("says 409 E_LOCKED when another process holds the queue's writer", async () => {
    const s = await startServer();
    const { QueueWriter } = await import("../../src/writer/writer");
    const fsDriver = (await import("../../adapters/drivers/fs")).default;
    // Same process, other driver instance: the pid lock is held, as it would be by another process.
    const writer = await QueueWriter.open("held", { driver: fsDriver({ dir: s.dir }), durability: "none" });
    try {
      const res = await s.post("/api/v1/queues/held/messages", "x");
      expect(res.status).toBe(409);
      expect(await errorCode(res)).toBe("E_LOCKED");
    } finally {
      await writer.close();
    }
    expect((await s.post("/api/v1/queues/held/messages", "x")).status).toBe(201);
  });
});
