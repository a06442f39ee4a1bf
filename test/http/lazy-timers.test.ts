/**
 * Making the app starts no timer: hosts such as workerd make it at global scope, where a timer is
 * refused ("Disallowed operation called within global scope"). The idle sweep starts with the
 * first consumer a request opens.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { createQueueHandler } from "../../runtime/index";
import { KEEP_MS } from "../../runtime/schedules";

afterEach(() => vi.restoreAllMocks());

describe("timers start at the first request, not when the app is made", () => {
  it("makes the app without setInterval or setTimeout; the first consume starts the idle sweep", async () => {
    const interval = vi.spyOn(globalThis, "setInterval");
    const timeout = vi.spyOn(globalThis, "setTimeout");
    const handler = createQueueHandler({ driver: memoryDriver(), auth: false, consumerIdleMs: 5000 });
    expect(interval).not.toHaveBeenCalled();
    expect(timeout).not.toHaveBeenCalled();
    await handler.push("q", "hello");
    const res = await handler.fetch(new Request("http://x/api/v1/queues/q/consumers/c/messages?timeout_ms=0"));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(interval.mock.calls.some(([, ms]) => ms === 1000)).toBe(true);
    await handler.close();
  });

  it("ready() where timers are refused (workerd at global scope) resolves; the schedules' keeping starts at the first request", async () => {
    const refuse = vi.spyOn(globalThis, "setInterval").mockImplementation(() => {
      throw new Error("Disallowed operation called within global scope.");
    });
    const handler = createQueueHandler({ driver: memoryDriver(), auth: false });
    await handler.ready();
    refuse.mockRestore();
    const interval = vi.spyOn(globalThis, "setInterval");
    const res = await handler.fetch(new Request("http://x/health"));
    expect(res.status).toBe(200);
    expect(interval.mock.calls.some(([, ms]) => ms === KEEP_MS)).toBe(true);
    await handler.close();
  });
});
