import { describe, expect, it } from "vitest";
import { parseScrape, valueOf, checkHistogram } from "../helpers/prometheus";
import { escapeLabel, Exposition, labels } from "../../runtime/metrics/exposition";
import { Histogram } from "../../runtime/metrics/histogram";
import { instrumentDriver } from "../../runtime/metrics/driver";
import { renderMetrics } from "../../runtime/metrics/scrape";
import { ServerMetrics } from "../../runtime/metrics/server-metrics";
import type { MonitorSnapshot } from "../../runtime/types";
import type { QueueDriver } from "../../src/core/driver";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import unstorageDriver from "../../adapters/drivers/unstorage";
import { createStorage } from "unstorage";
import { useTempDirs } from "../helpers/tmp";

const tempDir = useTempDirs("vq-metrics-");

const consumer = (name: string, kind: "ordered" | "shared", lag: number, shared?: { inFlight: number; redelivered: number; deadLettered: number }) => ({
  name,
  kind,
  part: 1,
  position: 0,
  count: 0,
  lag,
  lagBytes: lag * 10,
  consumedTotal: 5,
  consumedBytesTotal: 50,
  rate: 0,
  lastSeen: null,
  ...(shared ? { shared: { ...shared, oldestUnacked: null } } : {}),
});

const queue = (name: string, consumers: ReturnType<typeof consumer>[]) => ({
  name,
  messages: 7,
  bytes: 700,
  parts: 2,
  currentPart: 2,
  producedTotal: 7,
  producedBytesTotal: 70,
  produceRate: 0,
  consumeRate: 0,
  consumedTotal: 5,
  maxLag: 2,
  maxLagConsumer: null,
  consumers,
});

const snapshot: MonitorSnapshot = {
  at: 1_700_000_000_000,
  sampleMs: 1000,
  startedAt: 0,
  queues: [
    queue("a", [consumer("c1", "ordered", 2), consumer("w", "shared", 1, { inFlight: 3, redelivered: 4, deadLettered: 1 })]),
    queue("b.x-y_z", [consumer("c1", "ordered", 0)]),
  ],
};

describe("the metrics exposition", () => {
  it("writes every queue and consumer series, the shared ones for shared consumers only", () => {
    const families = parseScrape(renderMetrics(snapshot, new ServerMetrics(), undefined));
    expect(valueOf(families, "vqueue_queue_messages", { queue: "b.x-y_z" })).toBe(7);
    expect(valueOf(families, "vqueue_queue_parts", { queue: "a" })).toBe(2);
    expect(valueOf(families, "vqueue_consumer_lag_messages", { queue: "a", consumer: "c1", kind: "ordered" })).toBe(2);
    expect(valueOf(families, "vqueue_consumer_lag_bytes", { queue: "a", consumer: "w", kind: "shared" })).toBe(10);
    expect(valueOf(families, "vqueue_consumer_in_flight_messages", { queue: "a", consumer: "w" })).toBe(3);
    expect(valueOf(families, "vqueue_consumer_redelivered_total", { queue: "a", consumer: "w" })).toBe(4);
    expect(valueOf(families, "vqueue_consumer_dead_lettered_total", { queue: "a", consumer: "w" })).toBe(1);
    expect(families.get("vqueue_consumer_in_flight_messages")!.metrics).toHaveLength(1);
    expect(valueOf(families, "vqueue_monitor_sample_timestamp_seconds")).toBe(1_700_000_000);
  });

  it("keeps to the queues a user may read", () => {
    const principal = { username: "r", read: ["b.x-y_z"], write: false, admin: false };
    const families = parseScrape(renderMetrics(snapshot, new ServerMetrics(), principal));
    const queues = new Set([...families.values()].flatMap((f) => f.metrics.map((m) => m.labels?.queue)).filter(Boolean));
    expect([...queues]).toEqual(["b.x-y_z"]);
    const nobody = parseScrape(renderMetrics(snapshot, new ServerMetrics(), { ...principal, read: false }));
    expect(nobody.get("vqueue_queue_messages")!.metrics).toEqual([]);
  });

  it("writes a sample's series once for every scrape of it (server series fresh each time), a new sample's anew, a restricted user's apart", () => {
    // A sample whose consumer counts how often its lag is read.
    let reads = 0;
    const counted = consumer("c1", "ordered", 2);
    Object.defineProperty(counted, "lag", { get: () => (reads++, 2), enumerable: true });
    const sample: MonitorSnapshot = { ...snapshot, queues: [queue("a", [counted]), queue("b", [consumer("c1", "ordered", 0)])] };
    const server = new ServerMetrics();
    const first = renderMetrics(sample, server, undefined);
    server.fencedWrites++;
    const second = parseScrape(renderMetrics(sample, server, undefined));
    expect(reads).toBe(1);
    expect(valueOf(second, "vqueue_consumer_lag_messages", { queue: "a", consumer: "c1", kind: "ordered" })).toBe(2);
    expect(valueOf(parseScrape(first), "vqueue_fenced_writes_total")).toBe(0);
    expect(valueOf(second, "vqueue_fenced_writes_total")).toBe(1);
    // A user who reads only b: its own text, and the whole one stays whole.
    const onlyB = parseScrape(renderMetrics(sample, server, { username: "r", read: ["b"], write: false, admin: false }));
    expect(onlyB.get("vqueue_queue_messages")!.metrics.map((m) => m.labels?.queue)).toEqual(["b"]);
    expect(parseScrape(renderMetrics(sample, server, undefined)).get("vqueue_queue_messages")!.metrics).toHaveLength(2);
    // The next sample (a new snapshot): its values, not the last one's.
    const next = { ...sample, at: sample.at + 1000, queues: [queue("a", [consumer("c1", "ordered", 9)])] };
    const fresh = parseScrape(renderMetrics(next, server, undefined));
    expect(valueOf(fresh, "vqueue_consumer_lag_messages", { queue: "a", consumer: "c1", kind: "ordered" })).toBe(9);
    expect(valueOf(fresh, "vqueue_monitor_sample_timestamp_seconds")).toBe(1_700_000_001);
  });

  it("escapes label values and help text as the format says (a real parser reads them back)", () => {
    const nasty = 'a"b\\c\nd';
    expect(escapeLabel(nasty)).toBe('a\\"b\\\\c\\nd');
    const text = new Exposition()
      .family("x_total", "counter", "back\\slash\nnewline")
      .sample("x_total", labels({ v: nasty }), 1)
      .text();
    const family = parseScrape(text).get("x_total")!;
    expect(family.help).toBe("back\\slash\nnewline");
    expect(family.metrics[0]!.labels!.v).toBe(nasty);
  });

  it("writes histograms cumulative, +Inf equal to the count", () => {
    const h = new Histogram([1, 5, 10]);
    for (const v of [0.5, 1, 3, 7, 20, 20]) h.observe(v);
    expect([...h.counts]).toEqual([2, 1, 1, 2]);
    const text = new Exposition().family("h", "histogram", "a histogram").histogram("h", 'k="v"', h).text();
    const sample = parseScrape(text).get("h")!.metrics[0]!;
    expect(sample.labels).toEqual({ k: "v" });
    expect(sample.buckets).toEqual({ "1": "2", "5": "3", "10": "4", "+Inf": "6" });
    expect(checkHistogram(sample)).toBe(6);
    expect(Number(sample.sum)).toBe(51.5);
  });
});

describe("the measured driver", () => {
  const OPTIONAL = ["isLocked", "sizeOf", "writeAtomic", "syncDir", "watch", "dispose"] as const;
  const drivers: [string, () => QueueDriver][] = [
    ["fs", () => fsDriver({ dir: "/nonexistent-unused" })],
    ["memory", () => memoryDriver()],
    ["unstorage", () => unstorageDriver({ storage: createStorage() })],
    [
      "bare",
      () => ({
        ...memoryDriver(),
        isLocked: undefined,
        sizeOf: undefined,
        writeAtomic: undefined,
        syncDir: undefined,
        watch: undefined,
        dispose: undefined,
        storageKey: "bare:1",
      }),
    ],
  ];
  for (const [name, make] of drivers) {
    it(`keeps ${name}'s name, storageKey and optional methods, present or absent`, () => {
      const driver = make();
      const wrapped = instrumentDriver(driver, new ServerMetrics());
      expect(wrapped.name).toBe(driver.name);
      expect(wrapped.storageKey).toBe(driver.storageKey);
      for (const key of OPTIONAL) expect(typeof wrapped[key], key).toBe(typeof driver[key] === "function" ? "function" : "undefined");
      for (const key of OPTIONAL) expect(key in wrapped, key).toBe(typeof driver[key] === "function");
    });
  }

  it("passes each write's fence through to the driver (the redis driver refuses a stale holder's write or remove by it)", async () => {
    const seen: string[] = [];
    const inner = memoryDriver();
    const note = (what: string, fence: unknown) => seen.push(`${what} ${fence === lock ? "fenced" : "unfenced"}`);
    const recording: QueueDriver = {
      ...inner,
      remove: async (path, fence) => (note("remove", fence), inner.remove(path)),
      writeAtomic: async (path, data, options) => (note("writeAtomic", options.fence), inner.writeAtomic!(path, data)),
      openLog: async (path, options) => {
        const log = (await inner.openLog(path, options))!;
        return {
          ...log,
          append: async (at, data, fence) => (note("append", fence), log.append(at, data)),
          truncate: async (length, fence) => (note("truncate", fence), log.truncate(length)),
        };
      },
      openRecord: async (path, options) => {
        const record = (await inner.openRecord(path, options))!;
        return { ...record, replace: async (data, fence) => (note("replace", fence), record.replace(data)) };
      },
    };
    const lock = (await inner.lock("q_queue.lock"))!;
    const wrapped = instrumentDriver(recording, new ServerMetrics());
    const log = (await wrapped.openLog("q_info_idem", { create: true }))!;
    await log.append(0, new Uint8Array([1]), lock);
    await log.truncate(0, lock);
    await (await wrapped.openRecord("q_info_queue", { create: true }))!.replace(new Uint8Array([1]), lock);
    await wrapped.writeAtomic!("q_info_shared_c", new Uint8Array([1]), { sync: false, fence: lock });
    await wrapped.remove("q_info_idem", lock);
    expect(seen).toEqual(["append fenced", "truncate fenced", "replace fenced", "writeAtomic fenced", "remove fenced"]);
  });

  it("counts open handles, times syncs and measures appends", async () => {
    const metrics = new ServerMetrics();
    const driver = instrumentDriver(fsDriver({ dir: await tempDir() }), metrics);
    await driver.mkdir("q");
    const log = (await driver.openLog("q/log", { create: true }))!;
    const record = (await driver.openRecord("q/info", { create: true }))!;
    expect(metrics.openFiles).toEqual({ log: 1, record: 1 });
    await log.append(0, new Uint8Array(100));
    await log.append(100, new Uint8Array(5000));
    await log.sync();
    await record.replace(new Uint8Array(3));
    await record.sync();
    expect(metrics.appendBytes.count).toBe(2);
    expect(metrics.appendBytes.sum).toBe(5100);
    expect(metrics.fsync.log.count).toBe(1);
    expect(metrics.fsync.record.count).toBe(1);
    await log.close();
    await log.close();
    await record.close();
    expect(metrics.openFiles).toEqual({ log: 0, record: 0 });
    expect(await driver.openLog("q/missing", { create: false })).toBeUndefined();
    expect(metrics.openFiles.log).toBe(0);
  });
});
