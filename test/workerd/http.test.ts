/**
 * The v-queue HTTP app in workerd (Miniflare), on the durable-object driver, over real HTTP on
 * loopback: produce, long poll woken by a produce, commit, auth, a 5 MiB message, the app made at
 * global scope (no timers there), KV refused, and the queues kept across a restart of workerd
 * (Durable Object storage persisted to a directory).
 */
import type { Miniflare } from "../helpers/tool-types";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStorage } from "unstorage";
import cloudflareKVBindingDriver from "unstorage/drivers/cloudflare-kv-binding";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { createQueueHandler } from "../../runtime/index";
import { useTempDirs } from "../helpers/tmp";
import { startWorker } from "./_miniflare";
import { expectEndedEarly, WAKE_TIMEOUT_MS } from "../helpers/timing";
import { sleep } from "../helpers/sleep";

const tempDir = useTempDirs("vq-workerd-");
const AUTH = "alice:secret";
const basic = `Basic ${btoa(AUTH)}`;

describe("the HTTP app in workerd on Durable Objects", () => {
  let mf: Miniflare;
  let base: URL;
  let persist: string;
  const call = (path: string, init: RequestInit = {}) =>
    fetch(new URL(path, base), { ...init, headers: { authorization: basic, ...(init.headers as Record<string, string>) } });

  beforeAll(async () => {
    persist = await tempDir();
    mf = await startWorker({ persist, bindings: { AUTH }, http: true });
    base = await mf.ready;
  }, 60_000);
  afterAll(async () => {
    await mf?.dispose();
  });

  it("asks for credentials (401) and refuses wrong ones", async () => {
    const none = await fetch(new URL("/api/v1/queues/a/messages", base), { method: "POST", body: "x" });
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toContain("Basic");
    const wrong = await fetch(new URL("/api/v1/queues/a/messages", base), {
      method: "POST",
      body: "x",
      headers: { authorization: `Basic ${btoa("alice:nope")}` },
    });
    expect(wrong.status).toBe(401);
  });

  it("produces, long-polls (woken by a produce in another request), commits, and resumes after the commit", async () => {
    expect((await call("/api/v1/queues/orders/messages", { method: "POST", body: "first" })).status).toBe(201);
    const got = await (await call("/api/v1/queues/orders/consumers/c/messages?timeout_ms=0")).json();
    expect(got.messages.map((m: { data: string }) => m.data)).toEqual(["first"]);

    const started = performance.now();
    const polling = call(`/api/v1/queues/orders/consumers/c/messages?timeout_ms=${WAKE_TIMEOUT_MS}&commit=${encodeURIComponent(got.cursor)}`);
    await sleep(400);
    expect((await call("/api/v1/queues/orders/messages", { method: "POST", body: "second" })).status).toBe(201);
    const woken = await (await polling).json();
    expect(woken.messages.map((m: { data: string }) => m.data)).toEqual(["second"]);
    // It waited for the produce (a sleep cannot end early), and the produce, not the timeout, ended it.
    expect(performance.now() - started).toBeGreaterThanOrEqual(350);
    expectEndedEarly(started);

    const commit = await call("/api/v1/queues/orders/consumers/c/commit", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cursor: woken.cursor }),
    });
    expect(commit.status).toBe(200);
    const empty = await (await call("/api/v1/queues/orders/consumers/c/messages?timeout_ms=300")).json();
    expect(empty.count).toBe(0);
  });

  it("caps timeout_ms at 20 s in workerd (400 above it)", async () => {
    const res = await call("/api/v1/queues/orders/consumers/c/messages?timeout_ms=20001");
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("20000");
  });

  it("takes and gives back a 5 MiB message byte for byte", async () => {
    const body = new Uint8Array(5 * 1024 * 1024).map((_, i) => (i * 7 + (i >> 11)) & 0xff);
    const put = await call("/api/v1/queues/big/messages", { method: "POST", body, headers: { "content-type": "application/octet-stream" } });
    expect(put.status).toBe(201);
    const got = await call("/api/v1/queues/big/consumers/c/messages?timeout_ms=0", { headers: { accept: "application/octet-stream" } });
    expect(got.status).toBe(200);
    const bytes = new Uint8Array(await got.arrayBuffer());
    // The VQB1 batch holds the body whole: find it and compare.
    expect(Buffer.from(bytes).indexOf(Buffer.from(body))).toBeGreaterThan(0);
  });

  it("keeps queues and commits across a restart of workerd (Durable Object storage on disk)", async () => {
    expect((await call("/api/v1/queues/kept/messages", { method: "POST", body: "one" })).status).toBe(201);
    expect((await call("/api/v1/queues/kept/messages", { method: "POST", body: "two" })).status).toBe(201);
    const first = await (await call("/api/v1/queues/kept/consumers/c/messages?timeout_ms=0")).json();
    await call("/api/v1/queues/kept/consumers/c/commit", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cursor: first.cursor }),
    });
    await mf.dispose();

    mf = await startWorker({ persist, bindings: { AUTH }, http: true });
    base = await mf.ready;
    // The old isolate's locks were leases: a new writer and reader may wait out lockLeaseMs (3 s) at most.
    let next: { messages: { data: string }[] } | undefined;
    for (let i = 0; i < 40 && !next; i++) {
      const res = await call("/api/v1/queues/kept/consumers/c/messages?timeout_ms=0");
      if (res.status === 200) next = await res.json();
      else await sleep(500);
    }
    expect(next?.messages.map((m) => m.data)).toEqual(["two"]);
    const queues = await (await call("/api/v1/queues")).json();
    expect(JSON.stringify(queues)).toContain("kept");
  }, 60_000);
});

describe("the app made at global scope in workerd (memory driver)", () => {
  it("starts no timer there, and serves", async () => {
    const mf = await startWorker({ bindings: { STORAGE: "memory" } });
    try {
      expect((await mf.dispatchFetch("http://x/api/v1/queues/g/messages", { method: "POST", body: "hi" })).status).toBe(201);
      const got = (await (await mf.dispatchFetch("http://x/api/v1/queues/g/consumers/c/messages?timeout_ms=0")).json()) as { messages: { data: string }[] };
      expect(got.messages[0]!.data).toBe("hi");
      // The app was made at global scope: its start time must still be a real one.
      const overview = (await (await mf.dispatchFetch("http://x/api/v1/overview")).json()) as { startedAt?: number };
      expect(overview.startedAt).toBeGreaterThan(Date.parse("2020-01-01"));
    } finally {
      await mf.dispose();
    }
  });
});

describe("Workers KV is refused", () => {
  it("in workerd: a KV namespace binding as the driver fails with E_OPTION naming the Durable Object driver", async () => {
    const mf = await startWorker({ bindings: { STORAGE: "kv" } });
    try {
      const res = await mf.dispatchFetch("http://x/");
      expect(res.status).toBe(500);
      const error = (await res.json()) as { code: string; message: string };
      expect(error.code).toBe("E_OPTION");
      expect(error.message).toContain("KV namespace binding");
      expect(error.message).toContain("v-queue/drivers/durable-object");
    } finally {
      await mf.dispose();
    }
  });

  it("through unstorage's cloudflare-kv-binding driver, as a storage or as the app's driver", () => {
    const binding = {
      get: async () => null,
      put: async () => {},
      list: async () => ({ keys: [] }),
      delete: async () => {},
      getWithMetadata: async () => ({ value: null }),
    };
    const storage = createStorage({ driver: cloudflareKVBindingDriver({ binding: binding as never }) });
    expect(() => unstorageDriver({ storage })).toThrow(/unstorage storage on its cloudflare-kv-binding driver.*durable-object/);
    expect(() => createQueueHandler({ driver: binding as never })).toThrow(/KV namespace binding/);
  });
});
