// One behaviour suite per consumer kind, run against the plain and the partitioned class alike.
import { afterEach, describe, expect, it } from "vitest";
import memoryDriver from "../../adapters/drivers/memory";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { PartitionedConsumer } from "../../src/consumers/ordered/partitioned";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { openLeasingConsumer, openOrderedConsumer } from "../../src/open-consumer";
import { leasingConsumerContract, type LeasingSubject } from "./leasing-consumer-contract";
import { orderedConsumerContract, type OrderedSubject } from "./ordered-consumer-contract";

const quiet = { durability: "none", onProblem: () => {} } as const;
const opened: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const closable of opened.splice(0).reverse()) await closable.close().catch(() => {});
});
const kept = <T extends { close(): Promise<unknown> }>(closable: T): T => (opened.push(closable), closable);

let stores = 0;
/** A fresh memory storage with queue "q": plain, or of 3 partitions; `produce` spreads bodies over them by key. */
async function storage(partitioned: boolean) {
  const driver = memoryDriver({ name: `contract-${++stores}` });
  if (!partitioned) {
    const writer = kept(await QueueWriter.open("q", { driver, ...quiet }));
    return { driver, produce: async (bodies: string[]) => void (await writer.produce(bodies)) };
  }
  const writer = kept(await PartitionedWriter.open("q", { driver, partitions: 3, ...quiet }));
  return { driver, produce: async (bodies: string[]) => void (await Promise.all(bodies.map((body) => writer.produce([body], { partitionKey: body })))) };
}

describe.each([
  ["QueueConsumer", false],
  ["PartitionedConsumer", true],
])("ordered consumer contract: %s", (_, partitioned) => {
  orderedConsumerContract(async (): Promise<OrderedSubject> => {
    const { driver, produce } = await storage(partitioned);
    const options = { driver, start: "earliest", syncCommits: false, pollIntervalMs: 20 } as const;
    return {
      produce,
      open: async (name) => kept(partitioned ? await PartitionedConsumer.open("q", name, options) : await QueueConsumer.open("q", name, options)),
    };
  });
});

describe.each([
  ["SharedConsumer", false],
  ["PartitionedSharedConsumer", true],
])("leasing consumer contract: %s", (_, partitioned) => {
  leasingConsumerContract(async (): Promise<LeasingSubject> => {
    const { driver, produce } = await storage(partitioned);
    const options = { driver, start: "earliest", syncCommits: false, pollIntervalMs: 20 } as const;
    return {
      produce,
      open: async (name) => kept(partitioned ? await PartitionedSharedConsumer.open("q", name, options) : await SharedConsumer.open("q", name, options)),
    };
  });
});

describe("openOrderedConsumer, openLeasingConsumer", () => {
  it.each([false, true])("open the class of the queue's kind (partitioned: %s), the same interface either way", async (partitioned) => {
    const { driver, produce } = await storage(partitioned);
    await produce(["m1"]);
    const ordered = kept(await openOrderedConsumer("q", "o", { driver, start: "earliest" }));
    expect(ordered).toBeInstanceOf(partitioned ? PartitionedConsumer : QueueConsumer);
    expect((await ordered.read()).map((m) => [m.data, m.partition !== undefined])).toEqual([["m1", partitioned]]);
    const leasing = kept(await openLeasingConsumer("q", "l", { driver, start: "earliest" }));
    expect(leasing).toBeInstanceOf(partitioned ? PartitionedSharedConsumer : SharedConsumer);
    expect((await leasing.poll({ timeoutMs: 5000 })).map((m) => [m.data, m.partition !== undefined])).toEqual([["m1", partitioned]]);
  });
});
