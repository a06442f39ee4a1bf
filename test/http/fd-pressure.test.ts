/**
 * Running out of file descriptors is a passing shortage, not a fault: 503 `E_BUSY` with
 * `Retry-After` (never 500), idle consumers closed at once to make room (least recently used
 * first), a cap on consumers open at once, and a shorter idle time near it. In process, on
 * the memory driver made to fail like the fs driver at a file limit.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/core/driver";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { VQueueError } from "../../src/core/errors";
import { errorResponse } from "../../runtime/errors";
import { resolveQueueAppOptions } from "../../runtime/options";
import { createQueueHandler, type QueueAppOptions, type QueueHandler } from "../../runtime/index";
import { sleep } from "../helpers/sleep";

/** Node's error for a process out of descriptors. */
function emfile(path: string): Error {
  return Object.assign(new Error(`EMFILE: too many open files, open '${path}'`), { code: "EMFILE", errno: -24, syscall: "open", path });
}

/** The memory driver with at most `limit` handles open at once (`Infinity` until set), as a process under `ulimit -n`. */
function limitedDriver(): QueueDriver & { open_: number; limit: number } {
  const inner = memoryDriver();
  const limited = async <T extends { close(): Promise<void> }>(path: string, open: () => Promise<T | undefined>): Promise<T | undefined> => {
    if (driver.open_ >= driver.limit) throw emfile(path);
    const handle = await open();
    if (!handle) return undefined;
    driver.open_++;
    let closed = false;
    return {
      ...handle,
      close: async () => {
        if (!closed) driver.open_--;
        closed = true;
        await handle.close();
      },
    };
  };
  const driver = {
    ...inner,
    open_: 0,
    limit: Infinity,
    openLog: (path: string, options: { create: boolean }) => limited(path, () => inner.openLog(path, options)),
    openRecord: (path: string, options: { create: boolean }) => limited(path, () => inner.openRecord(path, options)),
  };
  return driver;
}

const handlers: QueueHandler[] = [];
afterEach(async () => {
  for (const handler of handlers.splice(0)) await handler.close();
});

function setup(options: QueueAppOptions = {}) {
  const driver = limitedDriver();
  const logger = { error: vi.fn(), warn: vi.fn() };
  const handler = createQueueHandler({ driver, durability: "none", syncCommits: false, logger, ...options });
  handlers.push(handler);
  const url = (path: string) => `http://vq.test/api/v1/queues/${path}`;
  const consume = (consumer: string, timeoutMs = 0, signal?: AbortSignal) =>
    handler.fetch(new Request(url(`q/consumers/${consumer}/messages?max_messages=10&timeout_ms=${timeoutMs}`), { signal }));
  const produce = (message: string) =>
    handler.fetch(new Request(url("q/messages"), { method: "POST", body: message, headers: { "content-type": "text/plain" } }));
  /** True when the consumer is closed: its lock is free (opened and closed again here, past the file limit). */
  const isClosed = async (consumer: string) => {
    const limit = driver.limit;
    driver.limit = Infinity;
    try {
      await (await QueueConsumer.open("q", consumer, { driver, create: false })).close();
      return true;
    } catch (error) {
      if (VQueueError.isError(error) && error.code === "E_LOCKED") return false;
      throw error;
    } finally {
      driver.limit = limit;
    }
  };
  return { driver, logger, handler, consume, produce, isClosed };
}

async function expectBusy(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(res.headers.get("retry-after")).toBe("1");
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("E_BUSY");
  return undefined;
}

const messages = async (res: Response) => {
  expect(res.status).toBe(200);
  return ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);
};

describe("out of file descriptors", () => {
  it("EMFILE/ENFILE, however wrapped (the engine's E_IO included), is 503 E_BUSY with Retry-After, not a logged 500", async () => {
    const logger = { error: vi.fn() };
    const wrapped = [
      emfile("/q/part"),
      Object.assign(new Error("ENFILE: file table overflow"), { code: "ENFILE" }),
      new VQueueError("E_IO", 'Queue "q" stopped after a storage error', { cause: emfile("/q/part") }),
      // As h3 wraps what a handler throws.
      Object.assign(new Error("h3"), { name: "HTTPError", status: 500, cause: new VQueueError("E_IO", "x", { cause: emfile("/x") }) }),
    ];
    for (const error of wrapped) {
      const res = errorResponse(error, logger);
      await expectBusy(res);
    }
    expect(logger.error).not.toHaveBeenCalled();
    // Other I/O faults are a 503 E_IO (a retry reopens the writer), and are logged.
    expect(errorResponse(new VQueueError("E_IO", "disk", { cause: Object.assign(new Error("EIO"), { code: "EIO" }) }), logger).status).toBe(503);
    expect(logger.error).toHaveBeenCalledTimes(1);
  });

  it("on EMFILE opening a consumer, closes the least recently used idle one, retries once, and answers 503 E_BUSY if still short", async () => {
    const { driver, logger, consume, produce, isClosed } = setup();
    expect((await produce("m")).status).toBe(201);
    expect(await messages(await consume("c1"))).toEqual(["m"]);
    expect(await messages(await consume("c2"))).toEqual(["m"]);
    // Consumers of one queue share the writer's open files, and let their position file go a
    // second after writing it: then they hold no descriptor of their own.
    await sleep(1100); // past that, and past the hand-out grace
    driver.limit = driver.open_; // nothing more opens (a new consumer must write its position file)
    expect(await messages(await consume("c2", 0))).toEqual([]); // c2 used again: c1 is the least recently used
    await sleep(1100);
    await expectBusy(await consume("c3"));
    expect(await isClosed("c1")).toBe(true);
    expect(await isClosed("c2")).toBe(false);
    expect(logger.warn).toHaveBeenCalledTimes(1);
    expect(String(logger.warn.mock.calls[0]![0])).toMatch(/Too many open files/);
    // Descriptors free again (elsewhere in the process): the retry succeeds.
    driver.limit = driver.open_ + 1;
    expect(await messages(await consume("c3"))).toEqual(["m"]);
    expect(logger.error).not.toHaveBeenCalled();
  });

  it("on EMFILE with no consumer idle, answers 503 E_BUSY with Retry-After; the retry succeeds once descriptors are free", async () => {
    const { driver, logger, consume, produce } = setup();
    expect((await produce("m")).status).toBe(201);
    expect(await messages(await consume("c1"))).toEqual(["m"]);
    driver.limit = driver.open_;
    const abort = new AbortController();
    const longPoll = consume("c1", 10_000, abort.signal); // c1 busy: nothing to close
    await sleep(50);
    await expectBusy(await consume("c2"));
    abort.abort();
    await longPoll.catch(() => {});
    driver.limit = driver.open_ + 1;
    await sleep(1100);
    expect(await messages(await consume("c2"))).toEqual(["m"]);
    expect(logger.error).not.toHaveBeenCalled();
  });

  it("keeps at most maxConsumers open: the least recently used idle one is closed to make room, or 503 when all are in use", async () => {
    // No idle sweep (consumerIdleMs 0): which consumer goes is the cap's choice alone, not the clock's.
    const { consume, produce, isClosed } = setup({ maxConsumers: 2, consumerIdleMs: 0 });
    expect((await produce("m")).status).toBe(201);
    expect(await messages(await consume("c1"))).toEqual(["m"]);
    expect(await messages(await consume("c2"))).toEqual(["m"]);
    // Both handed out just now: neither is closed for a third yet.
    await expectBusy(await consume("c3"));
    await sleep(1100);
    expect(await messages(await consume("c3"))).toEqual(["m"]);
    expect(await isClosed("c1")).toBe(true);
    expect(await isClosed("c2")).toBe(false);
    // c1 comes back where it was (nothing committed: the message again).
    await sleep(1100);
    expect(await messages(await consume("c1"))).toEqual(["m"]);
  });

  it("closes idle consumers sooner the fuller the cap: a second at the cap, consumerIdleMs below half", async () => {
    const full = setup({ maxConsumers: 3, consumerIdleMs: 60_000 });
    const roomy = setup({ maxConsumers: 100, consumerIdleMs: 60_000 });
    for (const { consume, produce } of [full, roomy]) {
      expect((await produce("m")).status).toBe(201);
      for (const c of ["c1", "c2", "c3"]) expect(await messages(await consume(c))).toEqual(["m"]);
    }
    await sleep(2500);
    // At the cap the least recently used goes after a second; the others may follow at once, or
    // (the cap now less full) later: how many went depends on how far apart the three were used.
    const closed = { full: 0, roomy: 0 };
    for (const c of ["c1", "c2", "c3"]) {
      if (await full.isClosed(c)) closed.full++;
      if (await roomy.isClosed(c)) closed.roomy++;
    }
    expect(await full.isClosed("c1")).toBe(true);
    expect(closed.full).toBeGreaterThanOrEqual(1);
    expect(closed.roomy).toBe(0);
  });

  it("validates maxConsumers and consumerIdleMs", () => {
    expect(resolveQueueAppOptions({ driver: memoryDriver({}) }).maxConsumers).toBe(4096);
    for (const maxConsumers of [0, -1, 1.5, Number.NaN, "8" as unknown as number]) {
      expect(() => resolveQueueAppOptions({ maxConsumers })).toThrow(/maxConsumers/);
    }
    for (const consumerIdleMs of [-1, 0.5, "1" as unknown as number]) {
      expect(() => resolveQueueAppOptions({ consumerIdleMs })).toThrow(/consumerIdleMs/);
    }
  });
});
