import { appendFile, readFile, readdir, rm, symlink, truncate, writeFile } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { serveQueues } from "../../adapters/server";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import type { QueueDriver } from "../../src/core/driver";
import type { QueueProblem } from "../../src/core/errors";
import { formatPopInfo, formatPushInfo, formatQueueInfo } from "../../src/format/info";
import { inspectQueue } from "../../src/inspect/queues";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { useTempDirs } from "../helpers/tmp";

const freshDir = useTempDirs("vq-recover-");
const texts = (messages: { data: unknown }[]) => messages.map((m) => m.data);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `m${from + i}`);

/** A queue "orders" on disk with `count` messages in part 0, and its writer closed. */
async function queueOnDisk(count: number, options: { keepInfoAt?: number } = {}) {
  const dir = await freshDir();
  const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
  let lagging: Buffer | undefined;
  for (let i = 0; i < count; i++) {
    await q.push(`m${i}`);
    if (i + 1 === options.keepInfoAt) lagging = await readFile(join(dir, "orders-0/orders_info_push"));
  }
  await q.close();
  return { dir, lagging };
}

/** A queue "orders" whose writer was opened three times: parts 0, 1 and 2, one message each (m0, m1, m2). */
async function queueInThreeParts(): Promise<string> {
  const dir = await freshDir();
  for (let part = 0; part < 3; part++) {
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    await q.push(`m${part}`);
    await q.close();
  }
  return dir;
}

const problemsOf = () => {
  const problems: QueueProblem[] = [];
  return { problems, onProblem: (p: QueueProblem) => problems.push(p) };
};

describe("readers take the part files as the truth once the writer is gone", () => {
  it("delivers fsynced messages past a push info line that lags (lost in a power cut), and counts them", async () => {
    const { dir, lagging } = await queueOnDisk(6, { keepInfoAt: 2 });
    await writeFile(join(dir, "orders-0/orders_info_push"), lagging!);
    const driver = fsDriver({ dir });
    const c = await QueueConsumer.open("orders", "c", { driver });
    expect(texts(await c.read({ max: 100 }))).toEqual(range(0, 6));
    expect((await inspectQueue(driver, "orders"))?.messages).toBe(6);
    expect((await inspectQueue(driver, "orders"))?.consumers[0]?.lag).toBe(6);
    expect(await c.lag()).toBe(6);
    await c.close();
  });

  it("delivers them when the push info line is deleted or damaged", async () => {
    for (const damage of ["delete", "garbage", "bad-crc"] as const) {
      const { dir } = await queueOnDisk(4);
      const info = join(dir, "orders-0/orders_info_push");
      if (damage === "delete") await rm(info);
      else await writeFile(info, damage === "garbage" ? "\u0000\u0001zz" : "orders;999;4;12345\n");
      const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }) });
      expect(texts(await c.read({ max: 100 })), damage).toEqual(range(0, 4));
      await c.close();
    }
  });

  it("finds parts newer than a stale (valid) queue line", async () => {
    const dir = await queueInThreeParts();
    expect((await readdir(dir)).filter((e) => e.startsWith("orders-")).sort()).toEqual(["orders-0", "orders-1", "orders-2"]);
    await writeFile(join(dir, "orders_info_queue"), formatQueueInfo({ queue: "orders", part: 0 }));
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }) });
    expect(texts(await c.read({ max: 100 }))).toEqual(range(0, 3));
    await c.close();
  });

  it("while a writer holds the lock, its info line is the high-water mark: bytes past it are not handed out", async () => {
    const dir = await freshDir();
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    await q.push("m0");
    // Bytes past the line, as a write in flight leaves them (here: the next record, copied by hand).
    const part = join(dir, "orders-0/orders_queue");
    const record = await readFile(part);
    const fake = Buffer.from(record);
    fake.writeBigUInt64LE(BigInt(record.length), 0);
    await appendFile(part, fake);
    // The same directory through a symlink: another storage key, as from another process.
    const link = join(await freshDir(), "link");
    await symlink(dir, link);
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir: link }) });
    expect(texts(await c.read())).toEqual(["m0"]);
    expect(await c.read()).toEqual([]);
    expect(await c.wait({ timeoutMs: 0 })).toBe(false);
    await c.close();
    await q.close();
  });

  it("stops before a torn tail once the writer is gone, says so once, and goes on when a writer cuts it and appends", async () => {
    const { dir } = await queueOnDisk(3);
    const part = join(dir, "orders-0/orders_queue");
    const whole = await readFile(part);
    await appendFile(part, whole.subarray(0, 30)); // half a record
    await truncate(join(dir, "orders-0/orders_info_push"), 0);
    const { problems, onProblem } = problemsOf();
    const link = join(await freshDir(), "link");
    await symlink(dir, link);
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir: link }), onProblem, pollIntervalMs: 10 });
    expect(texts(await c.read({ max: 100 }))).toEqual(range(0, 3));
    expect(await c.read()).toEqual([]);
    expect(await c.wait({ timeoutMs: 50 })).toBe(false);
    expect(problems.filter((p) => p.code === "TORN_TAIL")).toHaveLength(1);
    expect(c.position.position).toBe(whole.length);
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }), rollOnOpen: false });
    await q.push("m3");
    expect(await c.wait({ timeoutMs: 5000 })).toBe(true);
    expect(texts(await c.read())).toEqual(["m3"]);
    await q.close();
    await c.close();
  });
});

describe("a saved position is checked", () => {
  it("a position in a part that does not exist: reported, resumed at the next existing part", async () => {
    const dir = await queueInThreeParts();
    await rm(join(dir, "orders-1"), { recursive: true });
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 1, position: 0, count: 0 }));
    const { problems, onProblem } = problemsOf();
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }), onProblem });
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(texts(await c.read())).toEqual(["m2"]);
    await c.close();
  });

  it("a position past the end of its part (a truncated part): reported, resumed after the last valid record, and new messages flow", async () => {
    const { dir } = await queueOnDisk(5);
    const part = join(dir, "orders-0/orders_queue");
    const size = (await readFile(part)).length;
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 0, position: size, count: 5 }));
    await truncate(part, Math.floor(size / 2));
    await writeFile(join(dir, "orders-0/orders_info_push"), formatPushInfo({ queue: "orders", edge: size, count: 5 }));
    const { problems, onProblem } = problemsOf();
    const driver = fsDriver({ dir });
    const c = await QueueConsumer.open("orders", "c", { driver, onProblem });
    expect(problems.map((p) => p.code)).toContain("BAD_POSITION");
    expect(c.committed.position).toBeLessThanOrEqual(Math.floor(size / 2));
    expect(await c.read()).toEqual([]);
    const q = await QueueWriter.open("orders", { driver, onProblem });
    await q.push("later");
    expect(await c.wait({ timeoutMs: 5000 })).toBe(true);
    expect(texts(await c.read())).toEqual(["later"]);
    await c.commit();
    expect(await c.lag()).toBe(0);
    await q.close();
    await c.close();
  });
});

describe("a saved position that names other records than the consumer read is not trusted", () => {
  /** A queue "orders" with `count` messages m0.. in part 0, and consumer "c" that read and committed `read` of them. */
  async function readTo(count: number, read: number) {
    const { dir } = await queueOnDisk(count);
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }) });
    expect(await c.read({ max: read })).toHaveLength(read);
    await c.commit();
    const saved = c.committed;
    await c.close();
    return { dir, saved };
  }

  /** Removes every part and info line of "orders" (consumer files stay), as a wipe before writing the queue again. */
  async function wipeParts(dir: string) {
    for (const entry of await readdir(dir)) if (entry.startsWith("orders-") || entry === "orders_info_queue") await rm(join(dir, entry), { recursive: true });
  }

  async function writeAgain(dir: string, messages: string[], options: { rollOnOpen?: boolean } = {}) {
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }), ...options });
    await q.pushBatch(messages);
    await q.close();
  }

  async function openAndReadAll(dir: string, options: { start?: "earliest" | "latest" } = {}) {
    const { problems, onProblem } = problemsOf();
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }), onProblem, ...options });
    const read = texts(await c.read({ max: 100 }));
    await c.commit();
    await c.close();
    return { problems, read };
  }

  it("a position in a part newer than every part (the parts wiped and written again from part 0): reported, resumed at the consumer's start", async () => {
    const dir = await queueInThreeParts();
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 5, position: 0, count: 0 }));
    const { problems, read } = await openAndReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(problems[0]!.message).toContain("newer than every part of the queue");
    expect(read).toEqual(["m0", "m1", "m2"]);
    // Saved where it resumed: told once.
    expect((await openAndReadAll(dir)).problems).toEqual([]);
  });

  it("a position in a part newer than every part, for a consumer that starts at the latest: reported, and it waits at the end", async () => {
    const dir = await queueInThreeParts();
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 5, position: 0, count: 0 }));
    const { problems, onProblem } = problemsOf();
    const c = await QueueConsumer.open("orders", "c", { driver: fsDriver({ dir }), onProblem, start: "latest" });
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(c.committed.part).toBe(2);
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) });
    await q.push("m3");
    expect(texts(await c.poll({ timeoutMs: 5000 }))).toEqual(["m3"]);
    await q.close();
    await c.close();
  });

  it("the empty newest part the queue line names is a fine place to wait: not reported", async () => {
    const dir = await queueInThreeParts();
    await writeFile(join(dir, "orders_info_queue"), formatQueueInfo({ queue: "orders", part: 3 }));
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 3, position: 0, count: 0 }));
    const { problems, read } = await openAndReadAll(dir);
    expect(problems).toEqual([]);
    expect(read).toEqual([]);
  });

  // Records of m0..m9 are 27 bytes, the later ones 37: appended where the cut left off, they would run past the saved position (byte 216).
  it.each([
    { writer: "rollOnOpen: false (a partition's writer)", options: { rollOnOpen: false }, cutTo: 2 * 27 + 5 },
    { writer: "the default, cut inside the first record (an empty part is reused)", options: {}, cutTo: 5 },
  ])(
    "a part cut short below the saved position, then a reopened writer pushes 5 ($writer): reported, and the consumer gets all 5",
    async ({ options, cutTo }) => {
      const { dir, saved } = await readTo(10, 8);
      expect(saved.position).toBe(216);
      await truncate(join(dir, "orders-0/orders_queue"), cutTo);
      const later = Array.from({ length: 5 }, (_, i) => `later-${i}-abcd`);
      await writeAgain(dir, later, options);
      const { problems, read } = await openAndReadAll(dir);
      expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
      expect(read).toEqual(later);
    },
  );

  it("a part written again (its info line with it) so that the saved position falls inside a record: reported, resumed at that record", async () => {
    const { dir, saved } = await readTo(10, 8);
    await wipeParts(dir);
    // 37-byte records: the saved position (byte 216) falls inside the sixth (bytes 185..222).
    await writeAgain(
      dir,
      Array.from({ length: 8 }, (_, i) => `again-${i}-abcd`),
    );
    expect(saved.position).toBe(216);
    const { problems, read } = await openAndReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(problems[0]!.message).toContain("no record follows record 8");
    expect(read).toEqual(["again-5-abcd", "again-6-abcd", "again-7-abcd"]);
  });

  it("a part written again so that a record starts at the saved position, with another sequence number: reported, resumed at the record before it", async () => {
    const { dir, saved } = await readTo(10, 8);
    await wipeParts(dir);
    // Records of 54 bytes: the fifth starts at byte 216 (the saved position) with sequence number 5, not 9.
    await writeAgain(
      dir,
      Array.from({ length: 6 }, (_, i) => `again-${i}-${"x".repeat(21)}`),
    );
    expect(saved).toEqual({ part: 0, position: 216, count: 8 });
    const { problems, read } = await openAndReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(read.map((m) => (m as string).slice(0, 7))).toEqual(["again-3", "again-4", "again-5"]);
  });

  it("a part written again that ends at the saved position with another count: reported, resumed at its last record", async () => {
    const { dir, saved } = await readTo(10, 8);
    await wipeParts(dir);
    await writeAgain(
      dir,
      Array.from({ length: 4 }, (_, i) => `again-${i}-${"x".repeat(21)}`),
    );
    expect((await readFile(join(dir, "orders-0/orders_queue"))).length).toBe(saved.position);
    const { problems, read } = await openAndReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(read.map((m) => (m as string).slice(0, 7))).toEqual(["again-3"]);
  });

  /** A queue "orders" (m0..m9, 27-byte records) whose shared consumer "s" was handed all 10 and acknowledged `acks`, then closed. */
  async function sharedAcked(acks: number[]) {
    const { dir } = await queueOnDisk(10);
    const s = await SharedConsumer.open("orders", "s", { driver: fsDriver({ dir }) });
    const handed = await s.poll({ max: 10, timeoutMs: 0 });
    expect(handed).toHaveLength(10);
    for (const i of acks) await s.ack(handed[i]!);
    await s.close();
    return dir;
  }

  async function sharedReadAll(dir: string) {
    const { problems, onProblem } = problemsOf();
    const s = await SharedConsumer.open("orders", "s", { driver: fsDriver({ dir }), onProblem });
    const read = texts(await s.poll({ max: 100, timeoutMs: 0 }));
    await s.close();
    return { problems, read: read.map((m) => (m as string).slice(0, 7)) };
  }

  // New records of 54 bytes: the second starts at byte 54, where m2 (acknowledged) started.
  const again54 = (count: number) => Array.from({ length: count }, (_, i) => `again-${i}-${"x".repeat(21)}`);

  it("a shared consumer whose high-water mark no longer holds (the part written again under it): its acks above the floor are dropped, said, and every new message comes", async () => {
    const dir = await sharedAcked([2, 7]);
    await wipeParts(dir);
    await writeAgain(dir, again54(6));
    const { problems, read } = await sharedReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(problems[0]!.message).toContain("high-water mark");
    expect(read).toEqual(["again-0", "again-1", "again-2", "again-3", "again-4", "again-5"]);
  });

  it("a shared consumer whose saved floor is not trusted: what it kept above the floor goes with it", async () => {
    const dir = await sharedAcked([0, 1, 4]);
    await wipeParts(dir);
    // The floor (byte 54, after 2 records) now starts record 2; m4's offset (108) starts again-2.
    await writeAgain(dir, again54(6));
    const { problems, read } = await sharedReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION", "BAD_POSITION"]);
    expect(read).toEqual(["again-0", "again-1", "again-2", "again-3", "again-4", "again-5"]);
  });

  it("a shared consumer whose floor's part was deleted by hand: resumed at the next part, its acks there kept (not handed out again)", async () => {
    const { dir } = await queueOnDisk(2);
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }) }); // a new part: orders-1
    await q.pushBatch(["p1-0", "p1-1", "p1-2"]);
    await q.close();
    const s = await SharedConsumer.open("orders", "s", { driver: fsDriver({ dir }) });
    const handed = await s.poll({ max: 10, timeoutMs: 0 });
    expect(texts(handed)).toEqual(["m0", "m1", "p1-0", "p1-1", "p1-2"].map((t) => expect.stringMatching(new RegExp(`^${t}`))));
    await s.ack(handed[3]!); // p1-1, above the floor (part 0)
    await s.close();
    await rm(join(dir, "orders-0"), { recursive: true });
    const { problems, read } = await sharedReadAll(dir);
    expect(problems.map((p) => p.code)).toEqual(["BAD_POSITION"]);
    expect(read).toEqual(["p1-0", "p1-2"]);
  });

  it("a shared consumer whose state still holds keeps its acks", async () => {
    const dir = await sharedAcked([2, 7]);
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }), rollOnOpen: false });
    await q.push("m10");
    await q.close();
    const { problems, read } = await sharedReadAll(dir);
    expect(problems).toEqual([]);
    expect(read).toEqual(["m0", "m1", "m3", "m4", "m5", "m6", "m8", "m9", "m10"]);
  });

  it("a position right after damaged records the consumer stepped over is trusted: the record there follows with a gap", async () => {
    const { dir } = await queueOnDisk(4);
    const part = join(dir, "orders-0/orders_queue");
    const bytes = await readFile(part);
    bytes[2 * 27 + 25]! ^= 0xff; // m2's body: its crc fails
    await writeFile(part, bytes);
    // Where a consumer stands that read m0 and m1, then stepped over m2 at the end of what its (live) writer had written.
    await writeFile(join(dir, "orders_info_pop_c"), formatPopInfo({ queue: "orders", consumer: "c", part: 0, position: 3 * 27, count: 2 }));
    const { problems, read } = await openAndReadAll(dir);
    expect(problems).toEqual([]);
    expect(read).toEqual(["m3"]);
  });

  it("a position that holds is trusted, at a record and at the end of the part, with its writer open or gone", async () => {
    const { dir } = await readTo(10, 8);
    const first = await openAndReadAll(dir);
    expect(first).toEqual({ problems: [], read: ["m8", "m9"] });
    expect(await openAndReadAll(dir)).toEqual({ problems: [], read: [] });
    const q = await QueueWriter.open("orders", { driver: fsDriver({ dir }), rollOnOpen: false });
    await q.push("m10");
    expect(await openAndReadAll(dir)).toEqual({ problems: [], read: ["m10"] });
    await q.close();
  });
});

describe("cursors name positions in the queue, across processes", () => {
  it("a reopened consumer takes a cursor the earlier one handed out, and goes on after it", async () => {
    const driver = memoryDriver();
    const q = await QueueWriter.open("orders", { driver });
    await q.pushBatch(range(0, 6));
    let c = await QueueConsumer.open("orders", "c", { driver });
    const handed = await c.read({ max: 4 });
    await c.close(); // nothing committed: as if the process died
    c = await QueueConsumer.open("orders", "c", { driver });
    await c.commit(handed.at(-1)!);
    expect(c.committed).toEqual({ part: 0, position: handed.at(-1)!.offset + 25 + handed.at(-1)!.size, count: 4 });
    expect(texts(await c.read())).toEqual(["m4", "m5"]);
    await c.close();
    c = await QueueConsumer.open("orders", "c", { driver });
    expect(texts(await c.read())).toEqual(["m4", "m5"]);
    await c.close();
    await q.close();
  });

  it("refuses a cursor past the end, inside a record, or with a wrong count", async () => {
    const driver = memoryDriver();
    const q = await QueueWriter.open("orders", { driver });
    await q.pushBatch(range(0, 3));
    const c = await QueueConsumer.open("orders", "c", { driver });
    const edge = q.position.edge;
    for (const cursor of [`0.${edge + 27}.4`, `0.${edge - 3}.3`, `0.${edge}.2`, `1.0.1`, `3.27.1`]) {
      await expect(c.commit(cursor), cursor).rejects.toMatchObject({ code: "E_CURSOR" });
    }
    expect(c.committed.count).toBe(0);
    await c.commit(`0.${edge}.3`);
    expect(c.committed.count).toBe(3);
    await c.close();
    await q.close();
  });

  it("over HTTP: a commit after a server restart with a cursor the previous server handed out is taken", async () => {
    const dir = await freshDir();
    const start = () => serveQueues({ dir, port: 0, logger: { error: () => {}, warn: () => {} } });
    let server = await start();
    await fetch(`${server.url}/api/v1/queues/orders/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: range(0, 5) }),
    });
    const got = (await (await fetch(`${server.url}/api/v1/queues/orders/consumers/c/messages?max_messages=3&timeout_ms=0`)).json()) as { cursor: string };
    await server.close();
    server = await start();
    try {
      const res = await fetch(`${server.url}/api/v1/queues/orders/consumers/c/commit`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ cursor: got.cursor }),
      });
      expect(res.status).toBe(200);
      const next = (await (await fetch(`${server.url}/api/v1/queues/orders/consumers/c/messages?max_messages=10&timeout_ms=0`)).json()) as {
        messages: { data: string }[];
      };
      expect(next.messages.map((m) => m.data)).toEqual(["m3", "m4"]);
    } finally {
      await server.close();
    }
  });
});

describe("info lines read while another process rewrites them", () => {
  it("a line caught half-written is read again, not reported as BAD_INFO", async () => {
    const base = memoryDriver();
    const q = await QueueWriter.open("orders", { driver: base });
    await q.push("m0");
    let torn = 2;
    // What a reader sees in the instant a writer rewrites the line in place: part old, part new.
    const tearing: QueueDriver = {
      ...base,
      async readRecord(path) {
        const bytes = await base.readRecord(path);
        if (bytes && path === "orders_info_queue" && torn-- > 0) return Uint8Array.from([...bytes.subarray(0, 9), 0x39, ...bytes.subarray(10)]);
        return bytes;
      },
    };
    const { problems, onProblem } = problemsOf();
    const c = await QueueConsumer.open("orders", "c", { driver: tearing, onProblem });
    expect(problems).toEqual([]);
    expect(texts(await c.read())).toEqual(["m0"]);
    await c.close();
    await q.close();
  });
});
