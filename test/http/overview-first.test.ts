import { describe, expect, it } from "vitest";
import type { OverviewResponse } from "../../protocol/api";
import { openQueue } from "../../src/writer/writer";
import { openConsumer } from "../../src/consumers/ordered/consumer";
import fsDriver from "../../adapters/drivers/fs";
import { declarePartitions } from "../../src/partitions/declaration";
import { startServer, type TestServer } from "./_server";
import { parseScrape, valueOf } from "../helpers/prometheus";

/**
 * The first look after a start (issue 41): the monitor's first sample of many queues takes a
 * while, so the first answer comes with the queues read so far and names the others as pending.
 * Nothing in it is guessed: a queue shown has its exact figures, a queue not read yet is absent.
 */

const QUEUES = 200;
const name = (i: number) => `q${String(i).padStart(3, "0")}`;
/** Queue i holds `messages(i)`; consumer c0 read none of them, c1 the first one. */
const messages = (i: number) => 2 + (i % 5);

/** A partitioned queue among them (partition k holds k + 1 messages): an answer shows its row whole or names it pending. */
const PARTED = "zparted";
const PARTITIONS = 8;
const PARTED_MESSAGES = (PARTITIONS * (PARTITIONS + 1)) / 2;

/** The queues, written in this process before anyone looked at the server (the monitor has not sampled). */
async function fill(dir: string): Promise<void> {
  const driver = fsDriver({ dir });
  await declarePartitions(driver, PARTED, PARTITIONS);
  for (let k = 0; k < PARTITIONS; k++) {
    const partition = await openQueue(`${PARTED}.p${k}`, { driver, durability: "none" });
    await partition.pushBatch(Array.from({ length: k + 1 }, () => "m"));
    await partition.close();
  }
  let next = 0;
  const lane = async () => {
    while (next < QUEUES) {
      const i = next++;
      const writer = await openQueue(name(i), { driver, durability: "none" });
      await writer.pushBatch(Array.from({ length: messages(i) }, (_, k) => `message ${k}`));
      await writer.close();
      for (const consumer of ["c0", "c1"]) {
        const c = await openConsumer(name(i), consumer, { driver, syncCommits: false });
        if (consumer !== "c0") await c.poll({ max: 1, timeoutMs: 0 });
        await c.commit();
        await c.close();
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, lane));
}

/** firstAnswerMs 0: the first look answers with what the running sample has read, at once. */
const monitor = { firstAnswerMs: 0 };

async function started(): Promise<TestServer> {
  const s = await startServer({ monitor });
  await fill(s.dir);
  return s;
}

const all = [...Array.from({ length: QUEUES }, (_, i) => name(i)), PARTED];

describe("the first overview and /metrics after a start", () => {
  it("answer at once with the queues read so far, each exact, and name the others as pending until the first sample ends", async () => {
    const s = await started();
    const answers: OverviewResponse[] = [];
    for (;;) {
      const res = await s.get("/api/v1/overview");
      expect(res.status).toBe(200);
      const o = (await res.json()) as OverviewResponse;
      answers.push(o);
      // Every queue once: shown or pending (a partitioned queue by its name, never its partitions').
      expect([...o.queues.map((q) => q.name), ...o.pending].sort()).toEqual(all);
      for (const q of o.queues) {
        // Never the sum of the partitions read so far.
        if (q.name === PARTED) {
          expect(q).toMatchObject({ partitions: PARTITIONS, messages: PARTED_MESSAGES });
          continue;
        }
        const i = Number(q.name.slice(1));
        expect(q).toMatchObject({ messages: messages(i), consumers: 2, maxLag: messages(i), maxLagConsumer: "c0", producedTotal: 0, consumedTotal: 0 });
      }
      if (o.pending.length === 0) break;
    }
    // The first answer came before the first sample had read every queue: it said so.
    expect(answers[0]!.pending.length).toBeGreaterThan(0);
    expect(answers.at(-1)!.queues.map((q) => q.name)).toEqual(all);
    // A queue's own page waits for the whole sample: never a 404 for a queue not read yet.
    const s2 = await startServer({ monitor, dir: s.dir });
    const detail = await s2.get(`/api/v1/queues/${name(QUEUES - 1)}/overview`);
    expect(detail.status).toBe(200);
    expect(((await detail.json()) as { consumers: { name: string; lag: number }[] }).consumers.map((c) => [c.name, c.lag])).toEqual([
      ["c0", messages(QUEUES - 1)],
      ["c1", messages(QUEUES - 1) - 1],
    ]);
  });

  it("/metrics: a queue not read yet has no series (no zero), and vqueue_monitor_queues_pending says how many", async () => {
    const s = await started();
    const pendings: number[] = [];
    for (;;) {
      const res = await s.get("/metrics");
      expect(res.status).toBe(200);
      const families = parseScrape(await res.text());
      const pending = valueOf(families, "vqueue_monitor_queues_pending");
      expect(pending).toBeDefined();
      pendings.push(pending!);
      const series = families.get("vqueue_queue_messages")?.metrics ?? [];
      // A partitioned queue by partition: all of them or none.
      const partitions = series.filter((q) => q.labels!.queue === PARTED);
      expect(partitions.length === 0 || partitions.length === PARTITIONS).toBe(true);
      if (partitions.length > 0) expect(partitions.reduce((sum, q) => sum + Number(q.value), 0)).toBe(PARTED_MESSAGES);
      const shown = series.filter((q) => q.labels!.queue !== PARTED);
      expect(shown.length + (partitions.length > 0 ? 1 : 0) + pending!).toBe(QUEUES + 1);
      for (const sample of shown) {
        const queue = sample.labels!.queue!;
        const i = Number(queue.slice(1));
        expect(Number(sample.value)).toBe(messages(i));
        expect(valueOf(families, "vqueue_consumer_lag_messages", { queue, consumer: "c0", kind: "ordered" })).toBe(messages(i));
        expect(valueOf(families, "vqueue_consumer_lag_messages", { queue, consumer: "c1", kind: "ordered" })).toBe(messages(i) - 1);
      }
      // Consumer series only for the queues shown.
      const lagged = new Set(families.get("vqueue_consumer_lag_messages")?.metrics.map((c) => c.labels!.queue));
      lagged.delete(PARTED);
      expect([...lagged].sort()).toEqual(shown.map((q) => q.labels!.queue).sort());
      if (pending === 0) break;
    }
    expect(pendings[0]).toBeGreaterThan(0);
    expect(pendings.at(-1)).toBe(0);
  });
});
