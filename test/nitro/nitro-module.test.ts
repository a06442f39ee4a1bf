// v-queue/nitro in server code, set up directly in Node as the generated plugin does: the instance
// opens at its first useVQueue() (whatever the plugin order), its errors carry the API's HTTP
// status, its options are checked with the server's schema, and its HTTP API is not served
// without users unless auth is turned off on purpose.
import { afterEach, describe, expect, it, vi } from "vitest";
import vQueue, { registerVQueue, setupVQueue, useVQueue, vQueueFetch, type VQueueInstance } from "../../adapters/nitro";
import fsDriver from "../../adapters/drivers/fs";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-nitro-module-");
const opened: VQueueInstance[] = [];
afterEach(async () => {
  for (const instance of opened.splice(0)) await instance.close();
  vi.restoreAllMocks();
});
const track = (instance: VQueueInstance) => (opened.push(instance), instance);
const memory = { storage: "memory:", durability: "none" as const };

describe("useVQueue() before the module's plugin ran", () => {
  it("opens the instance at its first use from what the plugin registered when it loaded", async () => {
    expect(() => useVQueue("lazy-open")).toThrow('No v-queue named "lazy-open" in this server');
    registerVQueue("lazy-open", () => ({ options: memory }));
    const vq = track(useVQueue("lazy-open"));
    // The plugin, running later, gets the same instance.
    expect(useVQueue("lazy-open")).toBe(vq);
    await vq.push("jobs", "a");
    expect((await vq.shared("jobs", "w").poll()).map((m) => m.data)).toEqual(["a"]);
  });
});

describe("errors from useVQueue() carry the HTTP status the API answers", () => {
  it("400 for a bad name (push, shared), 409 for a settled lease, 409 with Retry-After for a queue held by a process that does not hand it over", async () => {
    const vq = track(setupVQueue("status-a", memory));
    const badName = await vq.push("bad name", "x").catch((e: unknown) => e);
    expect(badName).toMatchObject({ code: "E_NAME", status: 400, statusCode: 400, data: { error: { code: "E_NAME" } } });
    await expect(vq.shared("jobs", "bad name").poll()).rejects.toMatchObject({ code: "E_NAME", status: 400 });
    await vq.push("jobs", "a");
    const [leased] = await vq.shared("jobs", "w").poll();
    await vq.shared("jobs", "w").ack(leased!);
    await expect(vq.shared("jobs", "w").extend(leased!)).rejects.toMatchObject({ code: "E_LEASE", status: 409 });
    const partitioned = await vq.produce("plain", "x", { partitionKey: "k" }).catch((e: unknown) => e);
    expect(partitioned).toMatchObject({ code: "E_OPTION", status: 400 });

    const dir = await tempDir();
    const one = track(setupVQueue("status-b", { dir, durability: "none" }));
    const two = track(setupVQueue("status-c", { dir, durability: "none" }));
    await one.push("orders", "x");
    // Another instance holds the queue's writer: asked for it, it hands it over.
    await two.push("orders", "y");
    // An engine writer reads no hand-over request: refused once handoffTimeoutMs passed.
    const held = await QueueWriter.open("held", { driver: fsDriver({ dir }) });
    try {
      const locked = await two.push("held", "y").catch((e: unknown) => e);
      expect(locked).toMatchObject({ code: "E_LOCKED", status: 409, statusCode: 409, headers: { "retry-after": "1" } });
    } finally {
      await held.close();
    }
  });
});

describe("the module's options are checked with the server's schema", () => {
  it("at build: unknown keys (with a suggestion) and bad values", () => {
    expect(() => vQueue({ durabilty: "none" } as never)).toThrow(
      expect.objectContaining({ code: "E_OPTION", message: 'Unknown key "durabilty" (did you mean "durability"?).' }),
    );
    expect(() => vQueue({ metrcs: false, prefix: "/q" } as never)).toThrow('Unknown key "metrcs" (did you mean "metrics"?).');
    expect(() => vQueue({ auth: { users: [{ username: "a:b", password: "x" }] } })).toThrow("Invalid auth.users[0].username");
  });

  it("at run time: the runtime config's values, from env variables too", () => {
    expect(() => setupVQueue("runtime-bad", { ...memory, durability: "fsnyc" as never })).toThrow('Invalid durability "fsnyc"');
    expect(() => setupVQueue("runtime-unknown", { ...memory, metrcs: "false" } as never)).toThrow('Unknown key "metrcs" (did you mean "metrics"?).');
    // An env variable's raw string is parsed first (Nitro v3 passes strings).
    expect(() => setupVQueue("runtime-limits", { ...memory, limits: { maxMessages: "0" } } as never)).toThrow(
      "Invalid limits.defaultMessages 1: use 1..maxMessages (0).",
    );
  });
});

describe("the HTTP API is not served without users unless auth is turned off on purpose", () => {
  const get = (name: string, path: string, init?: RequestInit) => vQueueFetch(name, new Request(`http://app.test/_queue${path}`, init));

  it("no users: 404 for the API, the dashboard and the metrics, said once at start; server code still works", async () => {
    const info = vi.spyOn(console, "info").mockImplementation(() => {});
    const vq = track(setupVQueue("closed", memory));
    expect(info.mock.calls.map((c) => String(c[0]))).toEqual([
      expect.stringContaining('"closed": the HTTP API, dashboard and metrics at /_queue are not served: no users configured'),
    ]);
    for (const path of ["/api/v1/queues", "/", "/metrics", "/health"]) expect((await get("closed", path)).status).toBe(404);
    expect((await get("closed", "/api/v1/queues/tmpq", { method: "DELETE" })).status).toBe(404);
    await vq.push("jobs", "a");
    expect((await vq.shared("jobs", "w").poll()).map((m) => m.data)).toEqual(["a"]);
  });

  it("auth: false serves it without auth, with a warning at start", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const vq = track(setupVQueue("open", { ...memory, auth: false }));
    expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([
      expect.stringContaining('"open": the HTTP API, dashboard and metrics at /_queue are served WITHOUT auth (auth: false)'),
    ]);
    await vq.push("tmpq", "a");
    expect((await get("open", "/api/v1/queues")).status).toBe(200);
  });

  it("users: served behind auth", async () => {
    track(setupVQueue("users", { ...memory, auth: { users: [{ username: "admin", password: "secret" }] } }));
    expect((await get("users", "/api/v1/queues")).status).toBe(401);
    expect((await get("users", "/api/v1/queues", { headers: { authorization: `Basic ${btoa("admin:secret")}` } })).status).toBe(200);
  });
});
