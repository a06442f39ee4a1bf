import { describe, expect, it } from "vitest";
import { basic, jsonHeaders, startServer, type TestServer } from "./_server";
import { checkHistogram, parseScrape, valueOf, type PromFamily } from "../helpers/prometheus";
import { createQueueHandler } from "../../runtime/index";
import memoryDriver from "../../adapters/drivers/memory";
import { configProblems } from "../../adapters/config-schema";
import { sleep } from "../helpers/sleep";

const PRODUCE = "/api/v1/queues/:queue/messages";

async function scrape(s: TestServer, headers: Record<string, string> = {}): Promise<Map<string, PromFamily>> {
  const res = await s.get("/metrics", { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseScrape(await res.text());
}

/** Scrapes until `check` passes (the queue series follow the Monitor's samples), or fails with its last error. */
async function eventually(
  s: TestServer,
  check: (families: Map<string, PromFamily>) => void,
  headers: Record<string, string> = {},
): Promise<Map<string, PromFamily>> {
  const deadline = Date.now() + 8000;
  for (;;) {
    const families = await scrape(s, headers);
    try {
      check(families);
      return families;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(100);
    }
  }
}

const produce = (s: TestServer, queue: string, messages: unknown[], headers: Record<string, string> = {}) =>
  s.post(`/api/v1/queues/${queue}/messages`, JSON.stringify({ messages }), { ...jsonHeaders, ...headers });

describe("GET /metrics", () => {
  it("counts what was produced and consumed, per queue and consumer, with the lag", async () => {
    const s = await startServer({ durability: "fsync", monitor: { sampleMs: 100 } });
    // The queue and its consumers exist first: the Monitor counts from when it first saw them.
    expect((await produce(s, "orders", ["x"])).status).toBe(201);
    await s.get("/api/v1/queues/orders/consumers/all/messages");
    await s.get("/api/v1/queues/orders/consumers/slow/messages");
    await eventually(s, (f) => {
      expect(valueOf(f, "vqueue_queue_messages", { queue: "orders" })).toBe(1);
      expect(valueOf(f, "vqueue_consumer_lag_messages", { queue: "orders", consumer: "all", kind: "ordered" })).toBe(1);
      expect(valueOf(f, "vqueue_consumer_lag_messages", { queue: "orders", consumer: "slow", kind: "ordered" })).toBe(1);
    });
    expect((await produce(s, "orders", ["a", "b"])).status).toBe(201);
    expect((await produce(s, "orders", ["c"])).status).toBe(201);
    const all = await s.get("/api/v1/queues/orders/consumers/all/messages?max_messages=10");
    expect((await all.json()).count).toBe(3);
    expect((await s.post("/api/v1/queues/orders/consumers/all/commit")).status).toBe(200);
    expect((await s.post("/api/v1/queues/orders/consumers/slow/commit")).status).toBe(200);

    const families = await eventually(s, (f) => {
      expect(valueOf(f, "vqueue_produced_messages_total", { queue: "orders" })).toBe(3);
      expect(valueOf(f, "vqueue_consumer_consumed_messages_total", { queue: "orders", consumer: "all", kind: "ordered" })).toBe(4);
      expect(valueOf(f, "vqueue_consumer_lag_messages", { queue: "orders", consumer: "slow" })).toBe(3);
    });
    expect(valueOf(families, "vqueue_queue_messages", { queue: "orders" })).toBe(4);
    expect(valueOf(families, "vqueue_queue_parts", { queue: "orders" })).toBe(1);
    expect(valueOf(families, "vqueue_queue_bytes", { queue: "orders" })).toBeGreaterThan(4);
    expect(valueOf(families, "vqueue_produced_bytes_total", { queue: "orders" })).toBeGreaterThan(3);
    expect(valueOf(families, "vqueue_consumer_lag_messages", { queue: "orders", consumer: "all" })).toBe(0);
    expect(valueOf(families, "vqueue_consumer_lag_bytes", { queue: "orders", consumer: "all" })).toBe(0);
    expect(valueOf(families, "vqueue_consumer_lag_bytes", { queue: "orders", consumer: "slow" })).toBeGreaterThan(0);
    expect(valueOf(families, "vqueue_consumer_consumed_messages_total", { queue: "orders", consumer: "slow" })).toBe(1);
    expect(valueOf(families, "vqueue_consumer_consumed_bytes_total", { queue: "orders", consumer: "all" })).toBeGreaterThan(4);
  });

  it("shows a shared consumer's in-flight, redelivered and dead-lettered messages", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 }, shared: { maxDeliveries: 2 } });
    await produce(s, "jobs", ["j1", "j2", "j3"]);
    const lease = async (max: number) =>
      (await (await s.post("/api/v1/queues/jobs/consumers/w/lease", JSON.stringify({ max }), jsonHeaders)).json()).messages as { lease: string }[];
    const nack = (leases: string[]) => s.post("/api/v1/queues/jobs/consumers/w/nack", JSON.stringify({ leases }), jsonHeaders);
    let leased = await lease(1);
    const c = { queue: "jobs", consumer: "w", kind: "shared" };
    // Counted from when the Monitor first saw the consumer.
    await eventually(s, (f) => expect(valueOf(f, "vqueue_consumer_in_flight_messages", c)).toBe(1));
    await nack([leased[0]!.lease]); // j1 back: its 2nd delivery is a redelivery
    leased = await lease(1);
    await nack([leased[0]!.lease]); // 2 deliveries, maxDeliveries 2: dead-lettered
    leased = await lease(1); // j2, held
    expect(leased).toHaveLength(1);
    await eventually(s, (f) => {
      expect(valueOf(f, "vqueue_consumer_in_flight_messages", c)).toBe(1);
      expect(valueOf(f, "vqueue_consumer_redelivered_total", c)).toBe(1);
      expect(valueOf(f, "vqueue_consumer_dead_lettered_total", c)).toBe(1);
      expect(valueOf(f, "vqueue_consumer_rate_limited", c)).toBe(0);
    });
    // Backing off: 1 until it ends.
    expect((await s.post("/api/v1/queues/jobs/consumers/w/backoff", JSON.stringify({ delayMs: 60_000 }), jsonHeaders)).status).toBe(200);
    await eventually(s, (f) => expect(valueOf(f, "vqueue_consumer_rate_limited", c)).toBe(1));
  });

  it("keeps a shared consumer's dead-lettered count across a restart, where the other counters start again at 0", async () => {
    const options = { monitor: { sampleMs: 100 }, shared: { maxDeliveries: 2 } };
    const first = await startServer(options);
    await produce(first, "jobs", ["j1", "j2"]);
    const c = { queue: "jobs", consumer: "w", kind: "shared" };
    const lease = async () =>
      ((await (await first.post("/api/v1/queues/jobs/consumers/w/lease", JSON.stringify({ max: 1 }), jsonHeaders)).json()).messages as { lease: string }[])[0]!
        .lease;
    const nack = async (id: string) =>
      expect((await first.post("/api/v1/queues/jobs/consumers/w/nack", JSON.stringify({ leases: [id] }), jsonHeaders)).status).toBe(200);
    const held = await lease();
    await eventually(first, (f) => expect(valueOf(f, "vqueue_consumer_in_flight_messages", c)).toBe(1));
    await nack(held); // j1 back: its 2nd delivery is a redelivery
    await nack(await lease()); // 2 deliveries, maxDeliveries 2: dead-lettered
    await produce(first, "jobs", ["j3"]);
    await eventually(first, (f) => {
      expect(valueOf(f, "vqueue_consumer_dead_lettered_total", c)).toBe(1);
      expect(valueOf(f, "vqueue_consumer_redelivered_total", c)).toBe(1);
      expect(valueOf(f, "vqueue_produced_messages_total", { queue: "jobs" })).toBe(1);
    });
    await first.close();

    // The count is the consumer's own, kept in its files; the monitor's counters are the process's.
    const second = await startServer({ ...options, dir: first.dir });
    const families = await eventually(second, (f) => expect(valueOf(f, "vqueue_consumer_dead_lettered_total", c)).toBe(1));
    expect(valueOf(families, "vqueue_produced_messages_total", { queue: "jobs" })).toBe(0);
    expect(valueOf(families, "vqueue_consumer_redelivered_total", c)).toBe(0);
  });

  it("has HELP and TYPE for every family, counters ending in _total, and the server's own series", async () => {
    const s = await startServer({ durability: "fsync", monitor: { sampleMs: 100 } });
    await produce(s, "orders", ["a", "b"]);
    await produce(s, "orders", ["c"]);
    await s.get("/api/v1/queues/nope");
    await s.get("/api/v1/queues/orders/consumers/c/messages?max_messages=10");
    const families = await scrape(s);
    for (const family of families.values()) {
      expect(family.help.length, family.name).toBeGreaterThan(5);
      expect(["COUNTER", "GAUGE", "HISTOGRAM"], family.name).toContain(family.type);
      expect(family.name.endsWith("_total"), family.name).toBe(family.type === "COUNTER");
    }
    // By route pattern and status, never the raw path.
    expect(valueOf(families, "vqueue_http_requests_total", { route: PRODUCE, method: "POST", status: "201" })).toBe(2);
    expect(valueOf(families, "vqueue_http_requests_total", { route: "/api/v1/queues/:queue", method: "GET", status: "404" })).toBe(1);
    const routes = families.get("vqueue_http_requests_total")!.metrics.map((m) => m.labels!.route!);
    expect(routes.every((r) => !r.includes("orders") && !r.includes("nope"))).toBe(true);
    const latency = families.get("vqueue_http_request_duration_seconds")!.metrics.find((m) => m.labels?.route === PRODUCE)!;
    expect(checkHistogram(latency)).toBe(2);
    expect(Number(latency.sum)).toBeGreaterThan(0);
    const batch = families.get("vqueue_produce_batch_messages")!.metrics[0]!;
    expect(checkHistogram(batch)).toBe(2);
    expect(Number(batch.sum)).toBe(3);
    expect(Number(batch.buckets!["1"])).toBe(1);
    const appends = families.get("vqueue_storage_append_bytes")!.metrics[0]!;
    expect(checkHistogram(appends)).toBeGreaterThanOrEqual(2);
    const fsync = families.get("vqueue_storage_fsync_duration_seconds")!.metrics.find((m) => m.labels?.file === "log")!;
    expect(checkHistogram(fsync)).toBeGreaterThanOrEqual(2); // durability "fsync": each produce synced its part
    expect(valueOf(families, "vqueue_storage_open_files", { file: "log" })).toBeGreaterThanOrEqual(1);
    expect(valueOf(families, "vqueue_storage_open_files", { file: "record" })).toBeGreaterThanOrEqual(1);
    // The Node server's process series.
    expect(valueOf(families, "process_open_fds")).toBeGreaterThan(3);
    expect(valueOf(families, "process_resident_memory_bytes")).toBeGreaterThan(1e6);
    expect(valueOf(families, "process_cpu_seconds_total")).toBeGreaterThan(0);
    // The scrape itself is counted on the next one.
    const again = await scrape(s);
    expect(valueOf(again, "vqueue_http_requests_total", { route: "/metrics", method: "GET", status: "200" })).toBe(1);
  });

  it("shows parked long polls, then none once answered", async () => {
    const s = await startServer();
    await produce(s, "q", ["first"]);
    const { cursor } = await (await s.get("/api/v1/queues/q/consumers/c/messages")).json();
    await s.post("/api/v1/queues/q/consumers/w/lease", JSON.stringify({ max: 1 }), jsonHeaders);
    const poll = s.get(`/api/v1/queues/q/consumers/c/messages?timeout_ms=5000&commit=${cursor}`);
    const lease = s.post("/api/v1/queues/q/consumers/w/lease", JSON.stringify({ timeoutMs: 5000 }), jsonHeaders);
    await eventually(s, (f) => expect(valueOf(f, "vqueue_http_long_polls_in_flight")).toBe(2));
    await produce(s, "q", ["x"]);
    expect((await (await poll).json()).count).toBe(1);
    expect((await (await lease).json()).messages).toHaveLength(1);
    expect(valueOf(await scrape(s), "vqueue_http_long_polls_in_flight")).toBe(0);
    // A consume that does not wait is no long poll.
    await s.get("/api/v1/queues/q/consumers/c/messages");
    expect(valueOf(await scrape(s), "vqueue_http_long_polls_in_flight")).toBe(0);
  });

  it("is behind auth, and shows a user only the queues it may read", async () => {
    const users = [
      { username: "admin", password: "a" },
      { username: "reader", password: "r", read: ["a"], write: false },
    ];
    const s = await startServer({ auth: { users }, monitor: { sampleMs: 100 } });
    const admin = basic("admin", "a");
    const none = await s.get("/metrics");
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toContain("Basic");
    await produce(s, "a", ["1"], admin);
    await produce(s, "b", ["1", "2"], admin);
    await eventually(s, (f) => expect(valueOf(f, "vqueue_queue_messages", { queue: "b" })).toBe(2), admin);
    const seen = await eventually(s, (f) => expect(valueOf(f, "vqueue_queue_messages", { queue: "a" })).toBe(1), basic("reader", "r"));
    const queues = new Set([...seen.values()].flatMap((f) => f.metrics.map((m) => m.labels?.queue)).filter((q) => q !== undefined));
    expect([...queues]).toEqual(["a"]);
    // The 401 was counted, by route and status.
    expect(valueOf(seen, "vqueue_http_requests_total", { route: "/metrics", status: "401" })).toBe(1);
  });

  it("is served without auth with metrics.open, and not at all with metrics: false", async () => {
    const auth = { users: [{ username: "admin", password: "a" }] };
    const open = await startServer({ auth, metrics: { open: true }, monitor: { sampleMs: 100 } });
    await produce(open, "a", ["1"], basic("admin", "a"));
    await eventually(open, (f) => expect(valueOf(f, "vqueue_queue_messages", { queue: "a" })).toBe(1));
    const off = await startServer({ auth, metrics: false });
    const res = await off.get("/metrics", { headers: basic("admin", "a") });
    expect(res.status).toBe(404);
    expect((await res.json()).error.code).toBe("E_ROUTE");
    const doc = await (await off.get("/api/v1/openapi.json", { headers: basic("admin", "a") })).json();
    expect(doc.paths["/metrics"]).toBeUndefined();
    const docOpen = await (await open.get("/api/v1/openapi.json", { headers: basic("admin", "a") })).json();
    expect(docOpen.paths["/metrics"].get.security).toEqual([]);
  });

  it("refuses a bad metrics option with a clear error, in the app and in the server config", () => {
    const bad = (metrics: unknown) => () => createQueueHandler({ driver: memoryDriver(), metrics: metrics as never });
    expect(bad("yes")).toThrow(/Invalid metrics "yes": use true \(behind auth\), false \(no \/metrics route\) or \{ "open": true \}/);
    expect(bad({ open: "no" })).toThrow(/Invalid metrics.open "no": use true or false/);
    expect(bad({ opne: true })).toThrow(/Unknown key "metrics.opne"/);
    expect(configProblems({ metrics: { open: 1 } })).toEqual(["Invalid metrics.open 1: use true or false."]);
    expect(configProblems({ metrics: false })).toEqual([]);
    expect(configProblems({ metrics: { open: true } })).toEqual([]);
  });
});

describe("the /metrics exposition", () => {
  it("is strictly well-formed line by line: each TYPE once, samples under their family, _total only on counters", async () => {
    const s = await startServer({ monitor: { sampleMs: 100 } });
    await s.post("/api/v1/queues/a/messages", JSON.stringify({ messages: ["x"] }), jsonHeaders);
    await s.post("/api/v1/queues/a-1/messages", JSON.stringify({ messages: ["x", "y"] }), jsonHeaders);
    await s.get("/api/v1/queues/a/consumers/c/messages?max_messages=1");
    await s.post("/api/v1/queues/a/consumers/sh/lease", JSON.stringify({ max: 1 }), jsonHeaders);
    await s.get("/metrics");
    await sleep(300);
    await fetch(s.url + "/metrics", { method: "HEAD" });
    const text = await (await s.get("/metrics")).text();
    const typed = new Map<string, string>();
    const seenFamilies: string[] = [];
    let current = "";
    const problems: string[] = [];
    for (const line of text.split("\n")) {
      if (!line) continue;
      const m = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (m) {
        if (typed.has(m[1]!)) problems.push(`TYPE twice ${m[1]}`);
        typed.set(m[1]!, m[2]!);
        current = m[1]!;
        seenFamilies.push(current);
        continue;
      }
      if (line.startsWith("#")) continue;
      const name = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line)![1]!;
      const type = typed.get(current);
      const ok = name === current || (type === "histogram" && [`${current}_bucket`, `${current}_sum`, `${current}_count`].includes(name));
      if (!ok) problems.push(`sample ${name} under family ${current}`);
      if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? (NaN|[+-]Inf|-?[0-9.e+-]+)$/.test(line))
        problems.push(`bad line ${line}`);
      if (type !== "counter" && name.endsWith("_total")) problems.push(`_total on ${type}: ${name}`);
    }
    expect(problems).toEqual([]);
  });
});
