import { describe, expect, it } from "vitest";
import { createClient } from "../../client/index";
import { startServer } from "../http/_server";

describe("client produce: replayed", () => {
  it("a key the server already accepted: replayed true, the first answer again; a new key or none: false", async () => {
    const s = await startServer();
    const client = createClient({ baseURL: s.url });
    const first = await client.produce("q", "a", { idempotencyKey: "k" });
    expect(first).toMatchObject({ count: 1, replayed: false });
    expect(await client.produce("q", "other", { idempotencyKey: "k" })).toEqual({ ...first, replayed: true });
    // Binary too, and delayed (answered 202 the first time and again).
    expect(await client.produce("q", [new Uint8Array([1])], { idempotencyKey: "k", format: "binary" })).toEqual({ ...first, replayed: true });
    const delayed = await client.produce("q", "later", { idempotencyKey: "d", delayMs: 60_000 });
    expect(delayed.replayed).toBe(false);
    expect(await client.produce("q", "later", { idempotencyKey: "d", delayMs: 60_000 })).toEqual({ ...delayed, replayed: true });
    expect(await client.produce("q", "b", { idempotencyKey: "k2" })).toMatchObject({ count: 1, replayed: false });
    expect((await client.produce("q", "b")).replayed).toBe(false);
    await s.close();
  });

  it("a retry after a lost answer: false under the client's own key (this call wrote it), true under the caller's", async () => {
    const s = await startServer();
    let calls = 0;
    // A network that loses the answer of every other request (the server handled it).
    const lossy: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (calls++ % 2 === 0) {
        await res.arrayBuffer();
        throw new TypeError("fetch failed: connection reset");
      }
      return res;
    };
    const client = createClient({ baseURL: s.url, fetch: lossy, retryDelay: 10 });
    expect(await client.produce("q", "own key")).toMatchObject({ count: 1, replayed: false });
    expect(await client.produce("q", "given key", { idempotencyKey: "mine" })).toMatchObject({ count: 1, replayed: true });
    expect(calls).toBe(4);
    await s.close();
  });
});
