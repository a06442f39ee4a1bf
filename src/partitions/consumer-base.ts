/** The base of both partitioned consumers (consumers/ordered/partitioned.ts, consumers/shared/partitioned.ts). */
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { assertName } from "../core/names";
import type { PartitionFan } from "./fan";
import type { StartPosition } from "../options/queue";
import { openPartitions, partitionName, partitionNames } from "./declaration";
import { queueTotals } from "../log/totals";

/** What both partitioned consumers share: the fan over their partitions, and the calls that only pass through to it. */
export abstract class PartitionedConsumerBase<T, M, P> {
  readonly queue: string;
  readonly name: string;
  readonly partitions: number;
  protected readonly fan: PartitionFan<T, M, P>;
  #closed = false;

  protected constructor(queue: string, name: string, partitions: number, fan: PartitionFan<T, M, P>) {
    this.queue = queue;
    this.name = name;
    this.partitions = partitions;
    this.fan = fan;
  }

  /** The partition count of `queue` for a consumer `name` of it (declared first with `partitions`): `E_NOT_FOUND` when it is not declared. */
  protected static async declared(driver: QueueDriver, queue: string, name: string, partitions: number | undefined): Promise<number> {
    const count = await openPartitions(driver, queue, partitions);
    assertName(name, "consumer", partitionName(queue, count - 1));
    return count;
  }

  /**
   * With `start: "latest"`, the partitions of `queue` never written yet: a partition first written
   * after the consumer opened is read from its first message (opened at its end when its first
   * messages turn up, it would skip them). Empty for any other start.
   */
  protected static async unborn(driver: QueueDriver, queue: string, count: number, start: StartPosition | undefined): Promise<Set<string>> {
    if (start !== "latest") return new Set();
    const names = partitionNames(queue, count);
    const written = await Promise.all(names.map(async (name) => (await queueTotals(driver, name)) !== undefined));
    return new Set(names.filter((_, index) => !written[index]));
  }

  /** Takes the free partitions; on failure lets go of what it took. */
  protected static async started<C extends PartitionedConsumerBase<unknown, unknown, unknown>>(consumer: C): Promise<C> {
    try {
      await consumer.fan.start();
    } catch (error) {
      await consumer.fan.close().catch(() => {});
      throw error;
    }
    return consumer;
  }

  /** The partitions this instance holds now. */
  held(): number[] {
    return this.fan.set.held().map((slot) => slot.index);
  }

  /** Partitions handed over to another instance on request, since open. */
  get handedOver(): number {
    return this.fan.handedOver;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Messages after the saved positions (ack floors), summed over every partition. */
  lag(): Promise<number> {
    return this.fan.lag();
  }

  /** Waits for the commits in flight, closes each partition's consumer and releases its lock. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.fan.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  protected assertOpen(): void {
    if (this.#closed)
      throw new VQueueError("E_CLOSED", `${this.fan.kind[0]!.toUpperCase()}${this.fan.kind.slice(1)} "${this.name}" of queue "${this.queue}" is closed.`);
  }
}
