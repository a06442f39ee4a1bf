// subscribe()'s iterator (client/message-iterator.ts) on its own: the messages of a generator of
// batches, handed out one by one, with what a loop body may do to a generator: break, throw,
// call next() without waiting, and a finish step that must run before the next message.
import { describe, expect, it } from "vitest";
import { MessageIterator } from "../../client/message-iterator";
import { sleep } from "../helpers/sleep";

interface Trace {
  finished: number[];
  closed: boolean;
  asked: number;
}

/** Batches [1, 2, 3], [], [4, 5], then the end (or `fail` after the first batch). */
function source(trace: Trace, fail?: Error): AsyncGenerator<number[], void, undefined> {
  return (async function* () {
    try {
      for (const batch of [[1, 2, 3], [], [4, 5]]) {
        trace.asked++;
        await sleep(1);
        if (fail && trace.asked > 1) throw fail;
        if (batch.length > 0) yield batch;
      }
    } finally {
      trace.closed = true;
    }
  })();
}

const fresh = (): Trace => ({ finished: [], closed: false, asked: 0 });

describe("subscribe()'s message iterator", () => {
  it("hands out every message in order, each finished before the next, and ends with its batches", async () => {
    const trace = fresh();
    const seen: number[] = [];
    for await (const n of new MessageIterator(
      source(trace),
      (n) => void trace.finished.push(n),
      () => false,
    ))
      seen.push(n);
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(trace.finished).toEqual([1, 2, 3, 4, 5]);
    expect(trace.closed).toBe(true);
  });

  it("a break finishes nothing past the message in hand, and closes the batches (their finally runs)", async () => {
    const trace = fresh();
    for await (const n of new MessageIterator(
      source(trace),
      (n) => void trace.finished.push(n),
      () => false,
    ))
      if (n === 2) break;
    expect(trace.finished).toEqual([1]);
    expect(trace.closed).toBe(true);
    expect(trace.asked).toBe(1); // the next batch was never asked for
  });

  it("a throw in the body ends it the same way, and the error reaches the caller", async () => {
    const trace = fresh();
    const run = async () => {
      for await (const n of new MessageIterator(
        source(trace),
        (n) => void trace.finished.push(n),
        () => false,
      ))
        if (n === 4) throw new Error("boom");
    };
    await expect(run()).rejects.toThrow("boom");
    expect(trace.finished).toEqual([1, 2, 3]);
    expect(trace.closed).toBe(true);
  });

  it("a failing source ends the loop with its error", async () => {
    const trace = fresh();
    const seen: number[] = [];
    const run = async () => {
      for await (const n of new MessageIterator(
        source(trace, new Error("down")),
        () => undefined,
        () => false,
      ))
        seen.push(n);
    };
    await expect(run()).rejects.toThrow("down");
    expect(seen).toEqual([1, 2, 3]);
  });

  it("waits for a finish step that is a promise before the next message; stops when asked", async () => {
    const trace = fresh();
    const order: string[] = [];
    const finish = async (n: number) => {
      await sleep(2);
      order.push(`finished ${n}`);
    };
    let stop = false;
    for await (const n of new MessageIterator(source(trace), finish, () => stop)) {
      order.push(`got ${n}`);
      if (n === 4) stop = true;
    }
    expect(order).toEqual(["got 1", "finished 1", "got 2", "finished 2", "got 3", "finished 3", "got 4", "finished 4"]);
    expect(trace.closed).toBe(true);
  });

  it("next() called again without waiting: the calls are answered in order, none twice", async () => {
    const trace = fresh();
    const it = new MessageIterator(
      source(trace),
      (n) => void trace.finished.push(n),
      () => false,
    );
    const results = await Promise.all(Array.from({ length: 7 }, () => it.next()));
    expect(results.map((r) => (r.done ? "end" : r.value))).toEqual([1, 2, 3, 4, 5, "end", "end"]);
    expect(await it.return()).toEqual({ value: undefined, done: true });
    expect(trace.closed).toBe(true);
  });
});
