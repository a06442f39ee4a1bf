/**
 * A full disk or a failing write: the pushes in flight fail with E_IO (507 for ENOSPC, 503 for
 * the others, the cause in the message), nothing unwritten is acknowledged, reads go on, and
 * pushes work again by themselves once the storage does. Through a driver wrapper that makes
 * the part log's appends fail on demand (the fault a full disk gives).
 */
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import type { QueueDriver } from "../../src/core/driver";
import { createQueueHandler } from "../../runtime/index";

function failingDriver(): QueueDriver & { fail?: string } {
  const inner = memoryDriver();
  const driver: QueueDriver & { fail?: string } = {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      return (
        log && {
          ...log,
          append: async (at, data) => {
            if (driver.fail) throw Object.assign(new Error(`${driver.fail}: the storage refused the write`), { code: driver.fail });
            return log.append(at, data);
          },
        }
      );
    },
  };
  return driver;
}

async function setup() {
  const driver = failingDriver();
  const errors: unknown[] = [];
  const handler = createQueueHandler({
    driver,
    durability: "none",
    syncCommits: false,
    logger: { error: (...args: unknown[]) => errors.push(args), warn: () => {} },
  });
  const url = (path: string) => `http://vq.test/api/v1/queues/${path}`;
  const produce = (body: string) => handler.fetch(new Request(url("q/messages"), { method: "POST", body, headers: { "content-type": "text/plain" } }));
  const consume = async () => {
    const res = await handler.fetch(new Request(url("q/consumers/c/messages?max_messages=100&timeout_ms=0")));
    expect(res.status).toBe(200);
    return ((await res.json()) as { messages: { data: string }[] }).messages.map((m) => m.data);
  };
  return { driver, handler, produce, consume, errors };
}

describe("failing storage", () => {
  for (const [fault, status] of [
    ["ENOSPC", 507],
    ["EIO", 503],
  ] as const) {
    it(`${fault}: the push fails with ${status} E_IO and its cause, reads go on, and pushes work again once the storage does`, async () => {
      const { driver, handler, produce, consume, errors } = await setup();
      try {
        expect((await produce("before")).status).toBe(201);
        driver.fail = fault;
        const res = await produce("lost");
        expect(res.status).toBe(status);
        const body = (await res.json()) as { error: { code: string; message: string } };
        expect(body.error.code).toBe("E_IO");
        expect(body.error.message).toContain(fault);
        expect(errors.length).toBeGreaterThan(0); // a fault: logged
        expect(await consume()).toEqual(["before"]);
        driver.fail = undefined;
        expect((await produce("after")).status).toBe(201);
        // Nothing of the refused push was stored or handed out.
        expect(await consume()).toEqual(["after"]);
      } finally {
        await handler.close();
      }
    });
  }
});
