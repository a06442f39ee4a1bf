/**
 * Opens a consumer of either kind of queue as its interface (consumers/types.ts): the plain class
 * for an ordinary queue, the partitioned one for a declared partitioned queue. The one place a
 * caller that does not care which (the CLI, server code) has the question asked.
 */
import { QueueConsumer } from "./consumers/ordered/consumer";
import type { LeasingConsumer, OrderedConsumer } from "./consumers/types";
import { resolveConsumerOptions } from "./options/queue";
import { PartitionedConsumer, type PartitionedConsumerOptions } from "./consumers/ordered/partitioned";
import { PartitionedSharedConsumer, type PartitionedSharedOptions } from "./consumers/shared/partitioned";
import { readPartitions } from "./partitions/declaration";
import { SharedConsumer } from "./consumers/shared/consumer";

/** Whether `queue` is (or, with `partitions`, is to be declared) partitioned. */
async function isPartitioned(queue: string, options: { partitions?: number } & Parameters<typeof resolveConsumerOptions>[0]): Promise<boolean> {
  return options.partitions !== undefined || (await readPartitions(resolveConsumerOptions(options).driver, queue)) !== undefined;
}

/** Opens ordered consumer `name` of `queue`, partitioned or not (see `QueueConsumer`, `PartitionedConsumer`). */
export async function openOrderedConsumer(queue: string, name: string, options: PartitionedConsumerOptions = {}): Promise<OrderedConsumer> {
  return (await isPartitioned(queue, options)) ? PartitionedConsumer.open(queue, name, options) : QueueConsumer.open(queue, name, options);
}

/** Opens shared consumer `name` of `queue`, partitioned or not (see `SharedConsumer`, `PartitionedSharedConsumer`). */
export async function openLeasingConsumer(queue: string, name: string, options: PartitionedSharedOptions = {}): Promise<LeasingConsumer> {
  return (await isPartitioned(queue, options)) ? PartitionedSharedConsumer.open(queue, name, options) : SharedConsumer.open(queue, name, options);
}
