/**
 * A shared consumer of a partitioned queue, shared by many instances (README, "Partitioned
 * queues"): shared consumer `name` of each partition (shared-consumer.ts), held by one instance
 * at a time; this instance leases from the partitions it holds, round-robin. A lease carries its
 * partition, and `ack`/`nack`/`extend` go to that partition's consumer. A partition is handed
 * over once its leases are acknowledged or ran out (or after `handoffGraceMs`): the new holder
 * delivers the unacknowledged ones again (at least once).
 */
import { VQueueError } from "./errors";
import { resolveHandoffOptions, type ConsumerHandoffOptions, type ResolvedHandoffOptions } from "./handoff";
import { checkInteger, resolveConsumerOptions } from "./options";
import { FanConsumer } from "./fan-consumer";
import { PartitionFan } from "./partition-fan";
import { SharedConsumer, type LeasedMessage, type LeaseRef, type NackOptions, type SharedPollOptions } from "./shared-consumer";
import { MAX_LEASE_MS, resolveSharedOptions, type SharedConsumerOptions } from "./shared-options";
import { partitionName } from "./partitions";

export interface PartitionedSharedOptions extends SharedConsumerOptions, ConsumerHandoffOptions {
  /** Declares the queue with this many partitions if it is not declared yet; a declared queue must have as many. */
  partitions?: number;
}

/** A lease of a partitioned queue's message: in partition `partition`. */
export type PartitionedLeasedMessage = LeasedMessage & { partition: number };
export type PartitionedLeaseRef = LeaseRef & { partition: number };

export class PartitionedSharedConsumer extends FanConsumer<SharedConsumer, LeasedMessage, { leaseMs?: number }> {
  readonly handoff: ResolvedHandoffOptions;

  private constructor(queue: string, name: string, partitions: number, options: PartitionedSharedOptions) {
    const handoff = resolveHandoffOptions(options);
    const { handoffTimeoutMs: _t, minHoldMs: _m, idleMs: _i, handoffGraceMs: _g, partitions: _p, ...sharedOptions } = options;
    const fan = new PartitionFan<SharedConsumer, LeasedMessage, { leaseMs?: number }>({
      // Checked now, not at the first partition's open.
      driver: resolveSharedOptions(partitionName(queue, 0), sharedOptions).driver,
      queue,
      name,
      partitions,
      kind: "shared consumer",
      handoff,
      open: (partition) => SharedConsumer.open(partition, name, sharedOptions),
      busy: (shared) => shared.stats.inFlight > 0,
      close: (shared) => shared.close(),
      take: (shared, max, maxBytes, { leaseMs }) => shared.poll({ leaseMs, max, maxBytes, timeoutMs: 0 }),
      size: (message) => message.size,
      committed: (shared) => shared.floor,
    });
    super(queue, name, partitions, fan);
    this.handoff = handoff;
  }

  /** Opens shared consumer `name` of partitioned queue `queue` (`E_NOT_FOUND` when it is not declared); takes the free partitions. */
  static async open(queue: string, name: string, options: PartitionedSharedOptions = {}): Promise<PartitionedSharedConsumer> {
    const partitions = await FanConsumer.declared(resolveConsumerOptions(options).driver, queue, name, options.partitions);
    return FanConsumer.started(new PartitionedSharedConsumer(queue, name, partitions, options));
  }

  /** Leases up to `max` messages from the partitions held, round-robin, waiting up to `timeoutMs` for the first. */
  async poll(options: SharedPollOptions = {}): Promise<PartitionedLeasedMessage[]> {
    this.assertOpen();
    const { max = 10, maxBytes = Infinity, leaseMs, signal, timeoutMs } = options;
    checkInteger("max", max, 1, 1_000_000);
    if (maxBytes !== Infinity) checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
    if (leaseMs !== undefined) checkInteger("leaseMs", leaseMs, 1, MAX_LEASE_MS);
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, MAX_LEASE_MS);
    return this.fan.poll(max, maxBytes, timeoutMs, signal, { leaseMs });
  }

  /** Acknowledges a lease in its partition (see `SharedConsumer.ack`); `E_LEASE` when the partition was handed over since. */
  ack(ref: PartitionedLeaseRef): Promise<void> {
    return this.#route(ref).then((shared) => shared.ack(ref));
  }

  /**
   * Acknowledges many leases, one journal write per partition (see `SharedConsumer.ackAll`);
   * resolves with each one's error (`E_LEASE` for a partition handed over since), or undefined when acked.
   */
  async ackAll(refs: PartitionedLeaseRef[]): Promise<(Error | undefined)[]> {
    this.assertOpen();
    const errors: (Error | undefined)[] = new Array(refs.length).fill(undefined);
    const byPartition = new Map<SharedConsumer, number[]>();
    refs.forEach((ref, i) => {
      try {
        const shared = this.#consumerOf(ref);
        byPartition.set(shared, [...(byPartition.get(shared) ?? []), i]);
      } catch (error) {
        errors[i] = error as Error;
      }
    });
    await Promise.all(
      [...byPartition].map(async ([shared, indexes]) => {
        const settled = await shared.ackAll(indexes.map((i) => refs[i]!)).catch((error: Error) => indexes.map(() => error));
        indexes.forEach((i, k) => (errors[i] = settled[k]));
      }),
    );
    return errors;
  }

  /** Gives a lease back in its partition (see `SharedConsumer.nack`). */
  nack(ref: PartitionedLeaseRef, options?: NackOptions): Promise<void> {
    return this.#route(ref).then((shared) => shared.nack(ref, options));
  }

  /** Keeps a lease longer (see `SharedConsumer.extend`). */
  extend(ref: PartitionedLeaseRef, options?: { leaseMs?: number }): Promise<number> {
    return this.#route(ref).then((shared) => shared.extend(ref, options));
  }

  async #route(ref: PartitionedLeaseRef): Promise<SharedConsumer> {
    this.assertOpen();
    return this.#consumerOf(ref);
  }

  /** The shared consumer of a lease's partition: `E_LEASE` when the lease names none, or one handed over since. */
  #consumerOf(ref: PartitionedLeaseRef): SharedConsumer {
    if (!Number.isInteger(ref?.partition) || ref.partition < 0 || ref.partition >= this.partitions) {
      throw new VQueueError("E_LEASE", `Invalid lease: its partition ${JSON.stringify(ref?.partition)} is not one of queue "${this.queue}" (0 to ${this.partitions - 1}); give the lease as poll returned it.`);
    }
    const slot = this.fan.set.get(ref.partition);
    if (!slot) throw this.fan.notHeld(ref.partition, "E_LEASE");
    return slot.item;
  }
}

/** Opens shared consumer `name` of partitioned queue `queue`. See `PartitionedSharedConsumer`. */
export function openPartitionedShared(queue: string, name: string, options?: PartitionedSharedOptions): Promise<PartitionedSharedConsumer> {
  return PartitionedSharedConsumer.open(queue, name, options);
}
