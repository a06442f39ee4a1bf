// The client's outcomes (client/outcomes.ts) and worker()'s results and progress against a real server on loopback:
// finished() resolves with what the handler returned or rejects with the dead error, events() follows the stream.
import { describe, expect, it } from "vitest";
import { createClient, MessageDeadError, OutcomeTimeoutError, type OutcomeEventJSON } from "../../client/index";
import { startServer } from "../http/_server";
import { startServerProcess } from "./_server-process";

const clientOf = (s: { url: string }) => createClient({ baseURL: s.url });
const quiet = { onError: () => {} };

/** Events of `iterator` until `count` came. */
async function take(iterator: AsyncGenerator<OutcomeEventJSON>, count: number): Promise<OutcomeEventJSON[]> {
  const out: OutcomeEventJSON[] = [];
  for await (const event of iterator) {
    out.push(event);
    if (out.length === count) break;
  }
  return out;
}

describe("client: outcomes", () => {
  it("worker(): the handler's return value is its result, finished() resolves with it (from a produce's answer)", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const produced = await client.produce("q", { n: 20 });
    const worker = client.worker<{ n: number }>("q", "w", (m) => ({ doubled: (m.data as { n: number }).n * 2 }), { json: true, ...quiet });
    const done = await client.finished("q", "w", produced, { timeoutMs: 20_000 });
    expect(done).toMatchObject({ kind: "completed", part: produced.first.part, offset: produced.first.offset, result: { doubled: 40 } });
    // A position works too, and an ended message answers at once.
    expect((await client.finished("q", "w", produced.first)).result).toEqual({ doubled: 40 });
    await worker.stop();
  });

  it("finished() rejects with MessageDeadError (the handler's error) when the message goes to the dead-letter queue", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const produced = await client.produce("q", "poison");
    const worker = client.worker(
      "q",
      "w",
      () => {
        throw new Error("cannot handle poison");
      },
      { maxDeliveries: 1, ...quiet },
    );
    const error = await client.finished("q", "w", produced, { timeoutMs: 20_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MessageDeadError);
    expect(error).toMatchObject({ code: "E_DEAD", reason: "cannot handle poison", outcome: { kind: "dead", deliveries: 1 } });
    expect((error as Error).message).toContain("cannot handle poison");
    await worker.stop();
  });

  it("finished() rejects with OutcomeTimeoutError when the message does not end in time; bad arguments are TypeErrors", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const produced = await client.produce("q", "never handled");
    const error = await client.finished("q", "w", produced, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutcomeTimeoutError);
    expect(error).toMatchObject({ code: "E_TIMEOUT", timeoutMs: 300 });
    await expect(client.finished("q", "w", { part: 0 } as never)).rejects.toThrow(/give \{ part, offset \}/);
    await expect(client.finished("q", "w", produced, { timeoutMs: -1 })).rejects.toThrow(TypeError);
  });

  it("events(): ctx.progress() then the result, in order; the loop's break ends it", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const stream = client.events("q", "w", { from: "oldest" });
    const first = take(stream, 3);
    await client.produce("q", "job");
    const worker = client.worker(
      "q",
      "w",
      async (_m, ctx) => {
        void ctx.progress(10);
        await ctx.progress({ pct: 90 });
        return "ok";
      },
      quiet,
    );
    const got = await first;
    expect(got.map((e) => [e.kind, e.progress ?? e.result])).toEqual([
      ["progress", 10],
      ["progress", { pct: 90 }],
      ["completed", "ok"],
    ]);
    await worker.stop();
    // Resumed after the second: the third again, nothing else.
    expect(await take(client.events("q", "w", { after: got[1]!.cursor }), 1)).toEqual([got[2]]);
  });

  it("events(): the signal ends the loop without an error; ctx.progress() of a value that is not JSON rejects and sends nothing", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const produced = await client.produce("q", "job");
    let refused: unknown;
    const worker = client.worker(
      "q",
      "w",
      async (_m, ctx) => {
        refused = await ctx.progress(() => 1).catch((error: unknown) => error);
        return "ok";
      },
      quiet,
    );
    await client.finished("q", "w", produced, { timeoutMs: 20_000 });
    await worker.stop();
    expect(refused).toBeInstanceOf(TypeError);
    expect((refused as Error).message).toBe("A progress value must be a JSON value, not a function.");
    const controller = new AbortController();
    const seen: string[] = [];
    for await (const event of client.events("q", "w", { from: "oldest", signal: controller.signal })) {
      seen.push(event.kind);
      controller.abort();
    }
    expect(seen).toEqual(["completed"]);
  });

  it("worker(): a return value that is not JSON, or too large, nacks the message with a clear error", async () => {
    const s = await startServer();
    const client = clientOf(s);
    const a = await client.produce("q", "map");
    const b = await client.produce("q", "big");
    const worker = client.worker("q", "w", (m) => (m.data === "map" ? new Map([[1, 2]]) : "x".repeat(70_000)), { maxDeliveries: 1, ...quiet });
    await expect(client.finished("q", "w", a, { timeoutMs: 20_000 })).rejects.toMatchObject({
      reason: "The handler's return value must be a JSON value, not a Map.",
    });
    await expect(client.finished("q", "w", b, { timeoutMs: 20_000 })).rejects.toMatchObject({
      reason: expect.stringMatching(/70002 bytes as JSON: the most is 65536/),
    });
    await worker.stop();
  });

  it("events() connects again after the server restarts, after the last event it gave", { timeout: 120_000 }, async () => {
    const server = await startServerProcess();
    try {
      const client = createClient({ baseURL: server.url, retryDelay: 50 });
      const stream = client.events("q", "w", { from: "oldest" });
      const seen: OutcomeEventJSON[] = [];
      const reading = (async () => {
        for await (const event of stream) {
          seen.push(event);
          if (seen.length === 4) return;
        }
      })();
      await client.produce("q", ["a", "b", "c", "d"]);
      const leased = await client.lease("q", "w", { max: 4, leaseMs: 120_000 });
      await client.ack("q", "w", leased[0]!.lease, { results: { [leased[0]!.lease]: "a" } });
      await client.ack("q", "w", leased[1]!.lease, { results: { [leased[1]!.lease]: "b" } });
      while (seen.length < 2) await new Promise((r) => setTimeout(r, 20));
      await server.restart("SIGKILL");
      // The leases were lost with the process: the messages come again.
      const again = await client.lease("q", "w", { max: 2, leaseMs: 120_000, timeoutMs: 5000 });
      await client.ack(
        "q",
        "w",
        again.map((m) => m.lease),
        { results: Object.fromEntries(again.map((m) => [m.lease, m.data])) },
      );
      await reading;
      expect(seen.map((e) => e.result)).toEqual(["a", "b", "c", "d"]);
      expect(new Set(seen.map((e) => e.cursor)).size).toBe(4);
    } finally {
      await server.remove();
    }
  });
});
