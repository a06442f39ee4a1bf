// Message attributes through the client: produce options become Message-* headers, and
// worker() handles messages of a higher priority first, dead-letters one at its own maxDeliveries.
import { describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { startServer } from "../http/_server";

describe("client: message attributes", () => {
  it("produce with priority: a worker handles it before the backlog; maxDeliveries 1: dead at its first failure", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    await client.produce(
      "q",
      Array.from({ length: 30 }, (_, i) => `low${i}`),
    );
    await client.produce("q", "fragile", { maxDeliveries: 1 });
    await client.produce("q", "urgent", { priority: 9, backoff: { type: "exponential", delayMs: 100 } });
    const handled: string[] = [];
    const worker = client.worker(
      "q",
      "w",
      (m) => {
        handled.push(m.data as string);
        if (m.data === "fragile") throw new Error("always fails");
      },
      { concurrency: 1, batch: 1 },
    );
    // Every message handled: the lows, and "fragile" (produced after them) once.
    await expect.poll(() => handled.filter((b) => b.startsWith("low")).length + handled.filter((b) => b === "fragile").length, { timeout: 20_000 }).toBe(31);
    await worker.stop();
    expect(handled[0]).toBe("urgent");
    expect(handled.filter((b) => b === "fragile")).toEqual(["fragile"]);
    const dead = await client.consume("q.dead", "look", { maxMessages: 10 });
    expect(dead.messages).toHaveLength(1);
    await expect(client.produce("q", "x", { priority: 1000 })).rejects.toMatchObject({ status: 400 });
    await s.close();
  });

  it("a worker without a backoff of its own waits the message's backoff after a failure; other messages its default", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    await client.produce("q", "slow-retry", { backoff: { type: "fixed", delayMs: 60_000 } });
    await client.produce("q", "quick-retry");
    const tries = new Map<string, number>();
    const worker = client.worker(
      "q",
      "w",
      (m) => {
        tries.set(m.data as string, (tries.get(m.data as string) ?? 0) + 1);
        if (m.deliveries === 1) throw new Error("first try fails");
      },
      { concurrency: 2 },
    );
    // The default backoff (100 ms) brings "quick-retry" back; "slow-retry" waits its minute.
    await expect.poll(() => tries.get("quick-retry"), { timeout: 20_000 }).toBe(2);
    await worker.stop();
    expect(tries.get("slow-retry")).toBe(1);
    await s.close();
  });
});
