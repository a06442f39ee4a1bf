import { expect, it } from "vitest";
import type { QueueDriver } from "../../src/core/driver";
import { VQueueError } from "../../src/core/errors";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { inspectQueue, listConsumers, listQueues } from "../../src/inspect/queues";
import { purgeQueue } from "../../src/admin/purge";
import { deleteConsumer, deleteQueue } from "../../src/admin/delete";
import { pruneQueue } from "../../src/retention/prune";
import { openSharedLog } from "../../src/storage/handles";
import type { EngineTestContext } from "./engine-suite";

const quiet = { durability: "none", onProblem: () => {} } as const;

/** Pushes `counts[i]` messages into part i (a writer reopened per part), then closes it. */
async function fill(driver: QueueDriver, queue: string, counts: number[]): Promise<void> {
  for (const [part, count] of counts.entries()) {
    const q = await QueueWriter.open(queue, { driver, ...quiet });
    await q.pushBatch(Array.from({ length: count }, (_, i) => `${queue}:${part}:${i}`));
    await q.close();
  }
}

/** Reads everything consumer `name` (created at the earliest message) gets now, commits it, closes. */
async function drain(driver: QueueDriver, queue: string, name: string): Promise<string[]> {
  const c = await QueueConsumer.open(queue, name, { driver, syncCommits: false, onProblem: () => {} });
  try {
    const got = (await c.read({ max: 1000 })).map((m) => m.data as string);
    await c.commit();
    return got;
  } finally {
    await c.close();
  }
}

async function rejection(promise: Promise<unknown>): Promise<VQueueError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!VQueueError.isError(error)) throw new Error(`expected a VQueueError, got ${String(error)}`);
  return error;
}

/** A driver whose `remove` number `failAt` (from 1) fails, as a crash at that step would stop it. */
function failingRemove(driver: QueueDriver, failAt: number): QueueDriver {
  let calls = 0;
  return {
    ...driver,
    async remove(path) {
      if (++calls === failAt) throw new VQueueError("E_IO", `injected failure removing ${path}`);
      return driver.remove(path);
    },
  };
}

/** Purge, delete and delete-consumer on one driver: called inside the engine suite's `describe`. */
export function adminTests(setup: () => Promise<EngineTestContext> | EngineTestContext): void {
  it("purge: every message goes, the consumers stay at the new start, part ids go on, old cursors name nothing", async () => {
    const { driver, reopen } = await setup();
    await fill(driver, "q", [3, 2]);
    const c = await QueueConsumer.open("q", "c", { driver, syncCommits: false });
    const before = await c.read({ max: 2 });
    await c.commit();
    const oldCursor = c.cursor;
    await c.close();
    await drain(driver, "q", "d");

    const result = await purgeQueue(reopen(), "q", quiet);
    expect(result).toMatchObject({ queue: "q", messages: 5, parts: 2, part: 2 });
    expect(result.bytes).toBe((25 + 5) * 5);
    const stats = (await inspectQueue(driver, "q"))!;
    expect(stats).toMatchObject({ currentPart: 2, messages: 0, parts: [{ id: 2, bytes: 0, messages: 0 }] });
    expect(stats.consumers.map((s) => [s.name, s.part, s.position, s.count])).toEqual([
      ["c", 2, 0, 0],
      ["d", 2, 0, 0],
    ]);

    const q = await QueueWriter.open("q", { driver, ...quiet });
    const pushed = await q.push("after");
    await q.close();
    expect(pushed.part).toBeGreaterThan(1);
    const again = await QueueConsumer.open("q", "c", { driver, syncCommits: false });
    // A cursor from before the purge moves nothing, and cannot be sought to.
    await again.commit(oldCursor);
    expect(again.committed.part).toBe(2);
    await expect(again.seek(oldCursor)).rejects.toMatchObject({ code: "E_CURSOR" });
    expect((await again.read()).map((m) => m.data)).toEqual(["after"]);
    await again.close();
    expect(before.map((m) => m.data)).toEqual(["q:0:0", "q:0:1"]);
    expect(await drain(driver, "q", "new")).toEqual(["after"]);
  });

  it("delete: every file of the queue goes, and none of a queue whose name shares its start", async () => {
    const { driver } = await setup();
    // "a" gets parts a-0, a-1, a-2 (a-1 is a's part, not a queue); the others are queues of their own.
    await fill(driver, "a", [1, 1, 1]);
    for (const other of ["a-1", "a.b", "a_b", "ab"]) {
      await fill(driver, other, [2]);
      await drain(driver, other, "c");
    }
    await drain(driver, "a", "c");
    await drain(driver, "a", "c.d");
    // Retention took a-0 (recorded in a_info_pruned): that record goes with the queue too.
    expect((await pruneQueue(driver, "a", { maxParts: 2 })).deleted.map((p) => p.part)).toEqual([0]);
    const others = (await driver.list("")).filter((name) => !/^a(-\d+|_info_queue|_info_pruned|_info_pop_.*|_queue\.lock)$/.test(name)).sort();

    const result = await deleteQueue(driver, "a");
    expect(result).toEqual({ queue: "a", parts: 2, consumers: ["c", "c.d"] });
    expect((await driver.list("")).sort()).toEqual(others);
    expect(await listQueues(driver)).toEqual(["a-1", "a.b", "a_b", "ab"]);
    for (const other of ["a-1", "a.b", "a_b", "ab"]) {
      expect(await drain(driver, other, "fresh")).toEqual([`${other}:0:0`, `${other}:0:1`]);
      expect((await listConsumers(driver, other)).map((s) => s.name)).toEqual(["c", "fresh"]);
    }
    expect((await rejection(deleteQueue(driver, "a"))).code).toBe("E_NOT_FOUND");
    expect((await rejection(purgeQueue(driver, "a", quiet))).code).toBe("E_NOT_FOUND");
    expect((await rejection(QueueConsumer.open("a", "c", { driver }))).code).toBe("E_NOT_FOUND");
    // A push after the delete makes a new, empty queue, whose part 0 nothing says was pruned.
    await fill(driver, "a", [1]);
    const problems: string[] = [];
    const c = await QueueConsumer.open("a", "c", { driver, onProblem: (p) => problems.push(p.code) });
    expect((await c.read()).map((m) => m.data)).toEqual(["a:0:0"]);
    await c.close();
    expect(problems).toEqual([]);
  });

  it("delete consumer: its position goes; refused while it is open; unknown ones are not found", async () => {
    const { driver } = await setup();
    await fill(driver, "q", [2]);
    await drain(driver, "q", "c");
    await drain(driver, "q", "keep");
    const open = await QueueConsumer.open("q", "c", { driver });
    const busy = await rejection(deleteConsumer(driver, "q", "c"));
    expect(busy.code).toBe("E_LOCKED");
    expect(busy.message).toContain('consumer "c" of queue "q"');
    await open.close();
    await deleteConsumer(driver, "q", "c");
    expect((await listConsumers(driver, "q")).map((s) => s.name)).toEqual(["keep"]);
    expect((await rejection(deleteConsumer(driver, "q", "c"))).message).toContain('Consumer "c" of queue "q" does not exist');
    expect((await rejection(deleteConsumer(driver, "nope", "c"))).message).toContain('Queue "nope" does not exist');
    expect((await driver.list("")).filter((name) => name.startsWith("q_info_pop_c"))).toEqual([]);
    // Opened again, it starts over.
    expect(await drain(driver, "q", "c")).toEqual(["q:0:0", "q:0:1"]);
  });

  it("refuses purge and delete while a writer or a consumer of the queue is open in this process, and changes nothing", async () => {
    const { driver, reopen } = await setup();
    await fill(driver, "q", [2]);
    const w = await QueueWriter.open("q", { driver, ...quiet });
    const c = await QueueConsumer.open("q", "c", { driver });
    for (const attempt of [() => purgeQueue(reopen(), "q", quiet), () => deleteQueue(reopen(), "q")]) {
      const error = await rejection(attempt());
      expect(error.code).toBe("E_LOCKED");
      expect(error.message).toMatch(/its writer and consumer "c" are open/);
    }
    await w.close();
    expect((await rejection(deleteQueue(driver, "q"))).message).toMatch(/: consumer "c" is open/);
    expect((await c.read({ max: 10 })).map((m) => m.data)).toEqual(["q:0:0", "q:0:1"]);
    await c.close();
    // Every lock was let go: the writer opens, and now the purge goes through.
    expect(await driver.isLocked!("q_queue.lock")).toBe(false);
    expect((await purgeQueue(driver, "q", quiet)).messages).toBe(2);
  });

  it("two admins and a writer at once: no deadlock, no half-done work, every lock let go", async () => {
    const { driver, reopen } = await setup();
    await fill(driver, "q", [3, 3]);
    await drain(driver, "q", "c");
    const results = await Promise.allSettled([
      purgeQueue(driver, "q", quiet),
      purgeQueue(reopen(), "q", quiet),
      deleteQueue(reopen(), "q"),
      QueueWriter.open("q", { driver: reopen(), ...quiet }),
    ]);
    for (const r of results) if (r.status === "rejected") expect(["E_LOCKED", "E_NOT_FOUND"]).toContain((r.reason as VQueueError).code);
    const writer = results[3].status === "fulfilled" ? results[3].value : undefined;
    await writer?.close();
    for (const lock of ["q_queue.lock", "q_info_pop_c.lock"]) expect(await driver.isLocked!(lock)).toBe(false);
    const deleted = results[2].status === "fulfilled";
    const stats = await inspectQueue(driver, "q");
    if (deleted && !writer) expect(stats).toBeUndefined();
    else expect(stats).toBeDefined();
    // Whatever won, the queue is whole: it opens, and a push is read back.
    await fill(driver, "q", [1]);
    expect(await drain(driver, "q", "after")).toContain("q:0:0");
  });

  it("a purge or a delete cut short at any step leaves a queue that opens, and finishes when called again", async () => {
    for (const op of ["purge", "delete"] as const) {
      for (const failAt of [1, 2, 3, 4]) {
        const { driver } = await setup();
        await fill(driver, "q", [2, 2, 2]);
        await drain(driver, "q", "c");
        await drain(driver, "q", "d");
        const run = (d: QueueDriver) => (op === "purge" ? purgeQueue(d, "q", quiet) : deleteQueue(d, "q"));
        const failed = await run(failingRemove(driver, failAt)).then(
          () => false,
          () => true,
        );
        if (failed) {
          // Cut short: still a queue, and it opens for writing and reading.
          expect(await listQueues(driver)).toEqual(["q"]);
          await fill(driver, "q", [1]);
          // After a purge, "c" is at the new start; after a delete it may have lost its position and start over.
          const read = await drain(driver, "q", "c");
          if (op === "purge") expect(read).toEqual(["q:0:0"]);
          else expect(read.at(-1)).toBe("q:0:0");
          await run(driver);
        }
        if (op === "delete") expect(await driver.list("")).toEqual([]);
        else expect((await inspectQueue(driver, "q"))!.messages).toBe(0);
      }
    }
  });

  it("a queue deleted while a handle of its files is still open in this process starts clean when made again", async () => {
    const { driver, reopen } = await setup();
    await fill(driver, "q", [1]);
    // Someone in this process (an inspection, say) still reads the old part file.
    const held = (await openSharedLog(driver, "q-0/q_queue", { create: false }))!;
    await deleteQueue(driver, "q");
    const q = await QueueWriter.open("q", { driver, ...quiet });
    await q.push("fresh");
    await q.close();
    await held.close();
    expect(await drain(reopen(), "q", "c")).toEqual(["fresh"]);
  });
}
