// worker(): its options checked when it starts, and the lines it prints without an onError.
import { afterEach, describe, expect, it, vi } from "vitest";
import { createClient } from "../../client/index";
import { until } from "./_until";
import { startServer } from "../http/_server";
import { sleep } from "../helpers/sleep";

afterEach(() => void vi.restoreAllMocks());

describe("worker(): options and what it prints", () => {
  it("bad options are refused when it starts, with a TypeError naming the option and what it takes; no request is sent", async () => {
    const s = await startServer();
    let requests = 0;
    const counting: typeof fetch = (input, init) => (requests++, fetch(input, init));
    const client = createClient({ baseURL: s.url, fetch: counting });
    const start = (options: object) => () => client.worker("q", "w", () => {}, options);
    expect(start({ backoff: 100 })).toThrow(new TypeError("Invalid worker option backoff: 100; it takes a function (deliveries) => ms."));
    expect(start({ concurrency: -1 })).toThrow(/^Invalid worker option concurrency: -1; it takes an integer from 1 up\.$/);
    expect(start({ concurrency: 2.5 })).toThrow(TypeError);
    expect(start({ batch: 0 })).toThrow(/option batch/);
    expect(start({ leaseMs: "30s" })).toThrow(/option leaseMs: "30s"/);
    expect(start({ maxDeliveries: 0 })).toThrow(/option maxDeliveries/);
    expect(start({ pollTimeoutMs: -5 })).toThrow(/option pollTimeoutMs/);
    expect(start({ ackDelayMs: Number.NaN })).toThrow(/option ackDelayMs/);
    expect(start({ onError: "log" })).toThrow(/option onError: "log"; it takes a function/);
    expect(start({ onAck: {} })).toThrow(/option onAck/);
    expect(start({ signal: {} })).toThrow(/option signal: \{\}; it takes an AbortSignal/);
    expect(start({ json: "yes" })).toThrow(/option json/);
    await sleep(50);
    expect(requests).toBe(0);
    await s.close();
  });

  it("without onError: nothing while the queue does not exist, one line per failed delivery (n of max, the handler's message) and for the dead letter, no stack", async () => {
    const s = await startServer();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const client = createClient({ baseURL: s.url });
    const worker = client.worker(
      "later",
      "w",
      () => {
        throw new Error("card declined");
      },
      { pollTimeoutMs: 100, maxDeliveries: 2, backoff: () => 10 },
    );
    await sleep(800); // several lease requests meet E_NOT_FOUND
    expect(warn).not.toHaveBeenCalled();
    await client.produce("later", "order-1");
    await until(() => worker.stats.deadLettered === 1, 10_000);
    await worker.stop();
    const lines = warn.mock.calls.map((args) => args.map(String).join(" "));
    expect(lines).toEqual([
      "[v-queue] worker later/w: message seq 1 failed (delivery 1 of 2): card declined",
      "[v-queue] worker later/w: message seq 1 failed (delivery 2 of 2): card declined; sent to the dead-letter queue",
    ]);
    await s.close();
  });

  it("without onError: a server away prints one line, and one when it answers again, without a stack", async () => {
    const s = await startServer();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const client = createClient({ baseURL: s.url });
    await client.produce("jobs", "a");
    const seen: string[] = [];
    const worker = client.worker("jobs", "w", (m) => void seen.push(m.data as string), { pollTimeoutMs: 100 });
    await until(() => seen.length === 1);
    await sleep(100);
    await s.close();
    await sleep(1500); // several lease requests fail
    const s2 = await startServer({ dir: s.dir, port: s.port });
    await client.produce("jobs", "b");
    await until(() => seen.length === 2, 10_000);
    await worker.stop();
    const lines = warn.mock.calls.map((args) => args.map(String).join(" "));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^\[v-queue\] worker jobs\/w: the server does not answer \([^\n]+\); retrying until it does$/);
    expect(lines[1]).toBe("[v-queue] worker jobs/w: the server answers again");
    await s2.close();
  });

  it("a backoff that throws or gives no number of ms is told, and the message comes again after the default", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    await client.produce("q", ["a", "b"]);
    const told: string[] = [];
    const seen: string[] = [];
    const worker = client.worker(
      "q",
      "w",
      (m) => {
        seen.push(`${String(m.data)}${m.deliveries}`);
        if (m.deliveries === 1) throw new Error("once");
      },
      {
        backoff: (n) => {
          if (seen.includes("a1") && !told.some((t) => t.includes("throw"))) throw new Error("bad backoff");
          return Number.NaN + n;
        },
        concurrency: 1,
        onError: (e) => told.push((e as Error).message),
      },
    );
    await until(() => seen.includes("a2") && seen.includes("b2"), 10_000);
    await worker.stop();
    expect(told).toEqual(
      expect.arrayContaining([
        "backoff(1) gave a throw: bad backoff, not a number of ms from 0 up: 100 ms instead",
        "backoff(1) gave NaN, not a number of ms from 0 up: 100 ms instead",
      ]),
    );
    await s.close();
  });
});
