// A partitioned queue browsed, pruned and purged as one queue (each partition in turn).
import { describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { browseMessages, type BrowsedMessage } from "../../src/inspect/browse";
import type { QueueDriver } from "../../src/core/driver";
import { VQueueError } from "../../src/core/errors";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { declarePartitions, partitionOfKey } from "../../src/partitions/declaration";
import { purgeQueue } from "../../src/admin/purge";
import { deleteConsumer } from "../../src/admin/delete";
import { pruneQueue } from "../../src/retention/prune";
import { PartitionedConsumer } from "../../src/consumers/ordered/partitioned";

let stores = 0;

/** `count` partitions holding messages `key-<i>:<n>` for `keys` keys, `each` per key, in order per key; small parts (several per partition). */
async function filled(count: number, keys: number, each: number): Promise<{ driver: QueueDriver; sent: string[] }> {
  const driver = memoryDriver({ name: `partitioned-admin-${++stores}` });
  await declarePartitions(driver, "q", count);
  const writer = await PartitionedWriter.open("q", { driver, maxPartBytes: 1024 });
  const sent: string[] = [];
  for (let n = 0; n < each; n++) {
    for (let k = 0; k < keys; k++) {
      const body = `key-${k}:${n}`;
      await writer.produce([body], { partitionKey: `key-${k}` });
      sent.push(body);
    }
  }
  await writer.close();
  return { driver, sent };
}

/** Every page from `from` to the end, `limit` at a time. */
async function allPages(
  driver: QueueDriver,
  options: { limit: number; partition?: number; from?: string },
): Promise<{ messages: BrowsedMessage[]; pages: number }> {
  const messages: BrowsedMessage[] = [];
  let from: string | undefined = options.from;
  let pages = 0;
  for (;;) {
    const page = await browseMessages(driver, "q", {
      limit: options.limit,
      ...(from === undefined ? {} : { from }),
      ...(options.partition === undefined ? {} : { partition: options.partition }),
    });
    pages++;
    expect(page.messages.length).toBeLessThanOrEqual(options.limit);
    messages.push(...page.messages);
    if (page.next === null) return { messages, pages };
    from = page.next;
    expect(pages).toBeLessThan(1000);
  }
}

const bodyOf = (m: BrowsedMessage) => String(m.data);

describe("browsing a partitioned queue", () => {
  it("pages take from every partition in turn: each message once, each key in order, each with its partition and a cursor naming it", async () => {
    const { driver, sent } = await filled(5, 12, 15);
    for (const limit of [1, 7, 50, 1000]) {
      const { messages } = await allPages(driver, { limit });
      expect(messages.map(bodyOf).sort(), `limit ${limit}`).toEqual([...sent].sort());
      for (const m of messages) expect(m.partition).toBe(partitionOfKey(bodyOf(m).split(":")[0]!, 5));
      for (let k = 0; k < 12; k++) {
        const ofKey = messages.filter((m) => bodyOf(m).startsWith(`key-${k}:`)).map((m) => Number(bodyOf(m).split(":")[1]));
        expect(ofKey).toEqual(Array.from({ length: 15 }, (_, n) => n));
      }
    }
    // A small first page reads from several partitions, not one.
    const first = await browseMessages(driver, "q", { limit: 10 });
    expect(new Set(first.messages.map((m) => m.partition)).size).toBeGreaterThan(1);
    expect(first.next).toMatch(/^p\d:\d+\.\d+\.\d+(,p\d:\d+\.\d+\.\d+)*$/);
  });

  it("one partition alone: its messages in order, its cursors naming it; part and seq within it", async () => {
    const { driver, sent } = await filled(3, 6, 10);
    for (let partition = 0; partition < 3; partition++) {
      const { messages } = await allPages(driver, { limit: 4, partition });
      const mine = sent.filter((body) => partitionOfKey(body.split(":")[0]!, 3) === partition);
      expect(messages.map(bodyOf).sort()).toEqual([...mine].sort());
      expect(messages.every((m) => m.partition === partition)).toBe(true);
      const second = messages[1]!;
      const at = await browseMessages(driver, "q", { partition, from: { part: second.part, seq: second.seq }, limit: 1 });
      expect(at.messages.map(bodyOf)).toEqual([bodyOf(second)]);
      expect(at.next).toMatch(new RegExp(`^p${partition}:`));
    }
    await expect(browseMessages(driver, "q", { partition: 3 })).rejects.toMatchObject({ code: "E_OPTION" });
    await expect(browseMessages(driver, "q", { partition: 0, from: "p1:0.0.0" })).rejects.toMatchObject({ code: "E_OPTION" });
  });

  it("latest: the newest of every partition; a time: what was written from then on; later pages go on from there", async () => {
    const { driver, sent } = await filled(4, 8, 6);
    const latest = await browseMessages(driver, "q", { from: "latest", limit: 8 });
    expect(latest.messages.length).toBe(8);
    // Each partition's newest, the last written of its keys.
    for (const m of latest.messages) expect(Number(bodyOf(m).split(":")[1])).toBeGreaterThanOrEqual(4);
    expect(latest.next).toBeNull();
    // Written after the newest page: its end cursor finds exactly those.
    const writer = await PartitionedWriter.open("q", { driver });
    await writer.produce(["after"], { partitionKey: "key-3" });
    await writer.close();
    const since = await browseMessages(driver, "q", { from: latest.end, limit: 100 });
    expect(since.messages.map(bodyOf)).toEqual(["after"]);
    // A time before everything: all of it.
    const { messages } = await allPages(driver, { limit: 9, from: undefined });
    expect(messages.length).toBe(sent.length + 1);
    const fromTime = await browseMessages(driver, "q", { from: { time: 0 }, limit: 1000 });
    expect(fromTime.messages.length).toBe(sent.length + 1);
  });

  it("latest: a partition the page did not reach (it filled by bytes, or more partitions than limit) comes on the next pages with its newest, not skipped", async () => {
    const driver = memoryDriver({ name: `partitioned-admin-${++stores}` });
    await declarePartitions(driver, "q", 6);
    const writer = await PartitionedWriter.open("q", { driver });
    const big = "x".repeat(5000);
    // A key for each partition: every partition holds 3 messages, k:0 to k:2.
    const keys = Array.from({ length: 6 }, (_, k) => Array.from({ length: 1000 }, (_, i) => `key-${i}`).find((key) => partitionOfKey(key, 6) === k)!);
    for (let k = 0; k < 6; k++) for (let n = 0; n < 3; n++) await writer.produce([`${k}:${n}:${big}`], { partitionKey: keys[k]! });
    await writer.close();
    for (const options of [{ limit: 12, maxBytes: 12_000 }, { limit: 2 }]) {
      const seen: string[] = [];
      let page = await browseMessages(driver, "q", { from: "latest", ...options });
      for (let pages = 0; ; pages++) {
        // Only the last page may be empty (partitions this page did not reach may hold nothing more).
        if (page.next !== null) expect(page.messages.length, JSON.stringify(options)).toBeGreaterThan(0);
        seen.push(...page.messages.map((m) => bodyOf(m).slice(0, 3)));
        if (page.next === null) break;
        expect(pages).toBeLessThan(50);
        page = await browseMessages(driver, "q", { from: page.next, ...options });
      }
      // Each written partition's newest message shows, none twice.
      for (let k = 0; k < 6; k++) expect(seen, `${JSON.stringify(options)} partition ${k}`).toContain(`${k}:2`);
      expect(new Set(seen).size).toBe(seen.length);
    }
  });

  it("refuses a plain cursor or a part and seq without a partition, and a partition of an ordinary queue, saying what to give", async () => {
    const { driver } = await filled(2, 2, 2);
    await expect(browseMessages(driver, "q", { from: "0.0.0" })).rejects.toThrow(/p<partition>:0\.0\.0/);
    await expect(browseMessages(driver, "q", { from: { part: 0, seq: 1 } })).rejects.toThrow(/give the partition too/);
    await expect(browseMessages(driver, "q", { from: "p7:0.0.0" })).rejects.toThrow(/partition 7 does not exist/);
    const writer = await PartitionedWriter.open("q", { driver });
    await writer.close();
    const plain = memoryDriver({ name: `partitioned-admin-${++stores}` });
    const { QueueWriter } = await import("../../src/writer/writer");
    const w = await QueueWriter.open("plain", { driver: plain });
    await w.push(["x"]);
    await w.close();
    await expect(browseMessages(plain, "plain", { partition: 0 })).rejects.toThrow(/has no partitions/);
    await expect(browseMessages(plain, "plain", { from: "p0:0.0.0" })).rejects.toMatchObject({ code: "E_OPTION" });
  });

  it("partitions never written are empty, not an error", async () => {
    const driver = memoryDriver({ name: `partitioned-admin-${++stores}` });
    await declarePartitions(driver, "q", 8);
    expect(await browseMessages(driver, "q")).toMatchObject({ messages: [], next: null });
    const writer = await PartitionedWriter.open("q", { driver });
    await writer.produce(["one"], { partitionKey: "k" });
    await writer.close();
    const page = await browseMessages(driver, "q");
    expect(page.messages.map((m) => [m.partition, bodyOf(m)])).toEqual([[partitionOfKey("k", 8), "one"]]);
    expect(await browseMessages(driver, "q", { partition: (partitionOfKey("k", 8) + 1) % 8 })).toMatchObject({ messages: [], next: null });
  });
});

describe("pruning and purging a partitioned queue", () => {
  it("prune applies the limits to each partition and says what went from each", async () => {
    const { driver } = await filled(3, 6, 60);
    const result = await pruneQueue(driver, "q", { maxParts: 1 });
    expect(result.partitions?.map((p) => p.partition)).toEqual([0, 1, 2]);
    expect(result.messages).toBe(result.partitions!.reduce((sum, p) => sum + p.messages, 0));
    expect(result.messages).toBeGreaterThan(0);
    for (const p of result.partitions!) expect(p.deleted.length).toBeGreaterThan(0);
    // What is left: only each partition's current part.
    const left = await allPages(driver, { limit: 1000 });
    expect(left.messages.length).toBe(360 - result.messages);
    for (const partition of [0, 1, 2]) expect(new Set(left.messages.filter((m) => m.partition === partition).map((m) => m.part)).size).toBe(1);
  });

  it("purge empties every partition; consumers go on from the new start; a partition open elsewhere is E_LOCKED", async () => {
    const { driver } = await filled(3, 6, 5);
    const result = await purgeQueue(driver, "q");
    expect(result).toMatchObject({ queue: "q", messages: 30, partitions: 3 });
    expect((await browseMessages(driver, "q")).messages).toEqual([]);
    const writer = await PartitionedWriter.open("q", { driver });
    await writer.produce(["new"], { partitionKey: "key-1" });
    const consumer = await PartitionedConsumer.open("q", "c", { driver });
    expect((await consumer.read()).map(bodyOf)).toEqual(["new"]);
    await consumer.close();
    // The writer holds key-1's partition: refused, nothing said to be purged that was not.
    const refused = await purgeQueue(driver, "q").catch((error: unknown) => error);
    expect(VQueueError.isError(refused) && refused.code).toBe("E_LOCKED");
    await writer.close();
    expect(await purgeQueue(driver, "q")).toMatchObject({ messages: 1 });
  });

  it("deleting a consumer removes it from every partition; the next of that name starts anew; one held is E_LOCKED; none is E_NOT_FOUND", async () => {
    const { driver, sent } = await filled(3, 6, 2);
    const consumer = await PartitionedConsumer.open("q", "c", { driver });
    expect((await consumer.read({ max: 100 })).length).toBe(sent.length);
    await consumer.commit();
    const refused = await deleteConsumer(driver, "q", "c").catch((error: unknown) => error);
    expect(VQueueError.isError(refused) && refused.code).toBe("E_LOCKED");
    await consumer.close();
    await deleteConsumer(driver, "q", "c");
    expect((await driver.list("")).filter((path) => path.includes("_c") && path.includes("info_pop"))).toEqual([]);
    const again = await PartitionedConsumer.open("q", "c", { driver });
    expect((await again.read({ max: 100 })).length).toBe(sent.length);
    await again.close();
    await expect(deleteConsumer(driver, "q", "nobody")).rejects.toMatchObject({ code: "E_NOT_FOUND" });
  });
});
