import { mkdir } from "node:fs/promises";
import { join } from "pathe";
import { describe, expect, it } from "vitest";
import fsDriver from "../../adapters/drivers/fs";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { inspectQueue, listConsumers, listQueues } from "../../src/inspect/queues";
import { isValidConsumerName, isValidQueueName } from "../../src/core/names";
import {
  consumerLockPath,
  consumerOfPopFile,
  consumerOfSharedFile,
  partDir,
  partIndexPath,
  partOfDir,
  partPath,
  popInfoPath,
  prunedPath,
  delayedPath,
  idempotencyPath,
  pushInfoPath,
  queueInfoPath,
  sideJournalPath,
  queueOfInfoFile,
  sharedJournalPath,
  sharedOutcomesJournalPath,
  sharedOutcomesPath,
  sharedStatePath,
  writerLockPath,
} from "../../src/storage/paths";
import { QueueWriter } from "../../src/writer/writer";
import { errorCode, startServer } from "../http/_server";
import { useTempDirs } from "../helpers/tmp";
import { seededRandom } from "../helpers/random";

const freshDir = useTempDirs("vq-names-");

/** Pieces that spell the layout's own suffixes, so generated names try hard to collide. */
const TOKENS = [
  "a",
  "b",
  "x",
  "_",
  "-",
  "1",
  "0",
  "12",
  ".",
  "_info_",
  "_info",
  "info",
  "pop_",
  "_pop",
  "queue",
  "_queue",
  ".lock",
  "lock",
  "-1",
  "_info_pop_",
  "_info_queue",
  "push",
  "_info_push",
  "_index",
  "index",
  "_info_pruned",
  "pruned",
  "shared",
  "_info_shared_",
  "shlog",
  "_info_shlog_",
  "outc",
  "_info_outc_",
  "_info_outn_",
  "_shared",
  "delayed",
  "_info_delayed",
  "idem",
  "_info_idem",
  "_idem",
];

function names(seed: number, count: number): string[] {
  const next = seededRandom(seed);
  const out = new Set<string>();
  while (out.size < count) {
    const n = 1 + Math.floor(next() * 4);
    let name = "";
    for (let i = 0; i < n; i++) name += TOKENS[Math.floor(next() * TOKENS.length)];
    out.add(name);
  }
  return [...out];
}

const PARTS = [0, 1, 2, 10, 12];

/** Every path a (queue, consumer, part, kind) gives, with what it is the path of. */
function layout(queues: string[], consumers: string[]): Map<string, string[]> {
  const paths = new Map<string, string[]>();
  const add = (path: string, what: string) => {
    const owners = paths.get(path);
    if (owners) owners.push(what);
    else paths.set(path, [what]);
  };
  for (const q of queues) {
    add(queueInfoPath(q), `queue-info ${q}`);
    add(writerLockPath(q), `writer-lock ${q}`);
    add(prunedPath(q), `pruned ${q}`);
    add(delayedPath(q), `delayed ${q}`);
    add(idempotencyPath(q), `idempotency ${q}`);
    add(sideJournalPath(delayedPath(q)), `delayed-journal ${q}`);
    add(sideJournalPath(idempotencyPath(q)), `idempotency-journal ${q}`);
    add(sideJournalPath(prunedPath(q)), `pruned-copy ${q}`);
    for (const part of PARTS) {
      add(partDir(q, part), `part-dir ${q} ${part}`);
      add(partPath(q, part), `part ${q} ${part}`);
      add(pushInfoPath(q, part), `push-info ${q} ${part}`);
      add(partIndexPath(q, part), `part-index ${q} ${part}`);
    }
    for (const c of consumers) {
      if (!isValidConsumerName(c, q)) continue;
      add(popInfoPath(q, c), `pop ${q} ${c}`);
      add(consumerLockPath(q, c), `consumer-lock ${q} ${c}`);
      add(sharedStatePath(q, c), `shared-state ${q} ${c}`);
      add(sharedJournalPath(q, c), `shared-journal ${q} ${c}`);
      add(sharedOutcomesPath(q, c), `shared-outcomes ${q} ${c}`);
      add(sharedOutcomesJournalPath(q, c), `shared-outcomes-copy ${q} ${c}`);
    }
  }
  return paths;
}

describe("names map one-to-one onto the crate's flat layout", () => {
  it("no two distinct (queue, consumer, part, kind of file) give one path, over generated names", () => {
    for (let seed = 1; seed <= 10; seed++) {
      const generated = names(seed, 120);
      const queues = generated.filter((n) => isValidQueueName(n));
      const consumers = generated.filter((n) => isValidConsumerName(n));
      expect(queues.length).toBeGreaterThan(20);
      expect(consumers.length).toBeGreaterThan(20);
      const shared = [...layout(queues, consumers)].filter(([, owners]) => owners.length > 1);
      expect(shared).toEqual([]);
    }
  });

  it("reads each top-level name back as exactly what made it, and nothing else", () => {
    const generated = names(99, 120);
    const queues = generated.filter((n) => isValidQueueName(n));
    const consumers = generated.filter((n) => isValidConsumerName(n));
    const top = [...layout(queues, consumers).keys()].filter((p) => !p.includes("/"));
    for (const entry of top) {
      const owner = queueOfInfoFile(entry);
      if (owner !== undefined) expect(queueInfoPath(owner)).toBe(entry);
      for (const q of queues) {
        const c = consumerOfPopFile(q, entry);
        if (c !== undefined) expect(popInfoPath(q, c), `${q} ${entry}`).toBe(entry);
        const s = consumerOfSharedFile(q, entry);
        if (s !== undefined)
          expect([sharedStatePath(q, s), sharedJournalPath(q, s), sharedOutcomesPath(q, s), sharedOutcomesJournalPath(q, s)], `${q} ${entry}`).toContain(entry);
        const part = partOfDir(q, entry);
        if (part !== undefined) expect(partDir(q, part)).toBe(entry);
      }
    }
  });

  it("refuses the names of the issue with E_NAME and the rule in words", async () => {
    const driver = memoryDriver();
    for (const queue of ["orders_info_pop_b", "x_info_queue", "a_info", "y_info_push"]) {
      await expect(QueueWriter.open(queue, { driver })).rejects.toMatchObject({ code: "E_NAME", message: expect.stringContaining('may not contain "_info_"') });
    }
    const q = await QueueWriter.open("orders", { driver });
    await q.push("x");
    await expect(QueueConsumer.open("orders", "billing.lock", { driver })).rejects.toMatchObject({
      code: "E_NAME",
      message: expect.stringContaining('".lock"'),
    });
    for (const consumer of ["b_info_pop_c", "x_info_queue"]) {
      await expect(QueueConsumer.open("orders", consumer, { driver })).rejects.toMatchObject({ code: "E_NAME", message: expect.stringContaining('"_info_"') });
    }
    await expect(QueueConsumer.open("orders", "c".repeat(128), { driver })).resolves.toBeDefined();
    await expect(QueueConsumer.open("q".repeat(128), "c".repeat(128), { driver })).rejects.toMatchObject({ code: "E_NAME" });
    await q.close();
  });

  it("listing finds exactly the queues and consumers that exist, whatever names they have", async () => {
    for (let seed = 1; seed <= 5; seed++) {
      const driver = memoryDriver();
      const generated = names(1000 + seed, 40);
      const queues = generated.filter((n) => isValidQueueName(n)).slice(0, 8);
      const consumerNames = generated.filter((n) => isValidConsumerName(n)).slice(0, 6);
      const expected = new Map<string, string[]>();
      for (const queue of queues) {
        const q = await QueueWriter.open(queue, { driver });
        await q.push(`in ${queue}`);
        await q.close();
        const mine = consumerNames.filter((c, i) => (i + queue.length) % 2 === 0 && isValidConsumerName(c, queue));
        for (const name of mine) await (await QueueConsumer.open(queue, name, { driver })).close();
        expected.set(
          queue,
          mine.sort((a, b) => a.localeCompare(b)),
        );
      }
      expect(await listQueues(driver)).toEqual([...queues].sort());
      for (const [queue, mine] of expected) {
        expect(
          (await listConsumers(driver, queue)).map((c) => c.name),
          queue,
        ).toEqual(mine);
        expect((await inspectQueue(driver, queue))?.messages, queue).toBe(1);
      }
    }
  });

  it("a crate-made queue whose name the rule refuses breaks no listing or inspection of another queue", async () => {
    const dir = await freshDir();
    const driver = fsDriver({ dir });
    const q = await QueueWriter.open("orders", { driver });
    await q.push("x");
    await q.close();
    await (await QueueConsumer.open("orders", "billing", { driver })).close();
    // What the crate (which accepts any name) leaves for queue "orders_info_pop_b" and consumer "x_info_queue".
    await mkdir(join(dir, "orders_info_pop_b-0"), { recursive: true });
    await mkdir(join(dir, "orders_info_pop_x_info_queue"), { recursive: true });
    expect(await listQueues(driver)).toEqual(["orders"]);
    expect((await listConsumers(driver, "orders")).map((c) => c.name)).toEqual(["billing"]);
    expect((await inspectQueue(driver, "orders"))?.consumers.map((c) => c.name)).toEqual(["billing"]);
  });

  it("over HTTP: refuses colliding names with 400 E_NAME, and lists despite foreign entries", async () => {
    const s = await startServer();
    expect((await s.post("/api/v1/queues/orders/messages", "x")).status).toBe(201);
    let res = await s.post("/api/v1/queues/orders_info_pop_b/messages", "x");
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("E_NAME");
    res = await s.get("/api/v1/queues/orders/consumers/billing.lock/messages?timeout_ms=0");
    expect(res.status).toBe(400);
    expect(await errorCode(res)).toBe("E_NAME");
    res = await s.del("/api/v1/queues/orders/consumers/billing.lock");
    expect(res.status).toBe(400);
    await mkdir(join(s.dir, "orders_info_pop_b-0"), { recursive: true });
    expect((await s.get("/api/v1/queues/orders")).status).toBe(200);
    expect((await s.get("/api/v1/queues/orders/consumers")).status).toBe(200);
    expect((await (await s.get("/api/v1/queues")).json()) as { queues: { name: string }[] } | string[]).toBeDefined();
  });
});

describe("a queue the crate made under a name v-queue refuses keeps its files", () => {
  it("no valid (queue, consumer) of v-queue spells a file of a crate queue whose name holds _info_", () => {
    const generated = names(4242, 120);
    const safe = generated.filter((n) => /^[A-Za-z0-9._-]{1,128}$/.test(n) && !n.includes(".."));
    const crateQueues = safe.filter((n) => !isValidQueueName(n));
    const ours = new Set<string>();
    for (const q of safe.filter((n) => isValidQueueName(n)))
      for (const c of safe) if (isValidConsumerName(c, q)) ours.add(popInfoPath(q, c)).add(consumerLockPath(q, c));
    for (const q of crateQueues) for (const c of safe) expect(ours.has(popInfoPath(q, c)), `${q} ${c}`).toBe(false);
  });
});

describe("the writer's side files (delayed messages, idempotency keys)", () => {
  it("are read as no queue's info file and no consumer's file, whatever the names", () => {
    const generated = names(777, 120);
    const queues = generated.filter((n) => isValidQueueName(n));
    const consumers = generated.filter((n) => isValidConsumerName(n));
    for (const q of queues) {
      for (const path of [delayedPath(q), idempotencyPath(q)].flatMap((p) => [p, sideJournalPath(p)])) {
        expect(queueOfInfoFile(path), path).toBeUndefined();
        for (const other of queues) {
          expect(consumerOfPopFile(other, path), `${other} ${path}`).toBeUndefined();
          expect(consumerOfSharedFile(other, path), `${other} ${path}`).toBeUndefined();
          expect(partOfDir(other, path), `${other} ${path}`).toBeUndefined();
        }
      }
    }
    expect(consumers.length).toBeGreaterThan(20);
  });
});

describe("a shared consumer's state files", () => {
  it("fit in one file name whenever the pair's pop lock does, and are no other consumer's pop file", () => {
    const q = "q".repeat(120);
    const c = "c".repeat(255 - 15 - 120);
    expect(isValidConsumerName(c, q)).toBe(true);
    for (const path of [sharedStatePath(q, c), sharedJournalPath(q, c), sharedOutcomesPath(q, c), sharedOutcomesJournalPath(q, c)]) {
      expect(path.length).toBeLessThanOrEqual(consumerLockPath(q, c).length);
      expect(consumerOfPopFile(q, path)).toBeUndefined();
    }
  });
});
