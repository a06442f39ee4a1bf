import type { QueueDriver } from "../src/core/driver";
import { VQueueError } from "../src/core/errors";
import type { MessageInput } from "../src/format/message";
import { PartitionedWriter, type PartitionedProduceOptions, type PartitionedProduceResult } from "../src/writer/partitioned";
import type { Schedule, ScheduleInput } from "../src/writer/schedules";
import type { ServerMetrics } from "./metrics/server-metrics";
import type { ResolvedQueueAppOptions } from "./options";

/**
 * The writers of the partitioned queues this server produces to: one PartitionedWriter per
 * queue, opened on first produce and kept (it opens, hands over and reopens the partitions'
 * writers itself: a produce that failed on a lost lock is not acknowledged, the next one goes on).
 */
export class PartitionedWriters {
  #writers = new Map<string, Promise<PartitionedWriter>>();

  constructor(
    private readonly options: ResolvedQueueAppOptions,
    private readonly driver: () => Promise<QueueDriver>,
    private readonly metrics: ServerMetrics | undefined,
  ) {}

  /** Produces the batch, whole, into one partition of `queue` (see PartitionedWriter.produce). */
  produce(queue: string, messages: MessageInput[], options: PartitionedProduceOptions): Promise<PartitionedProduceResult> {
    return this.#use(queue, (writer) => writer.produce(messages, options));
  }

  /** Sets a schedule of `queue`, kept by its partition 0's writer (taken by request as a produce takes it). */
  schedule(queue: string, name: string, input: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    return this.#use(queue, (writer) => writer.schedule(name, input));
  }

  /** Removes a schedule of `queue`: false when there was none. */
  unschedule(queue: string, name: string): Promise<boolean> {
    return this.#use(queue, (writer) => writer.unschedule(name));
  }

  /** Takes partition 0's writer of `queue` (its schedules' keeper) when no other instance holds it. */
  holdForSchedules(queue: string): Promise<void> {
    return this.#use(queue, (writer) => writer.holdIfFree());
  }

  async #use<T>(queue: string, use: (writer: PartitionedWriter) => Promise<T>): Promise<T> {
    const writer = await this.#writer(queue);
    try {
      return await use(writer);
    } catch (error) {
      if (VQueueError.isError(error) && error.code === "E_FENCED" && this.metrics) this.metrics.fencedWrites++;
      // Closed under it (a delete): the next produce opens it again.
      if (VQueueError.isError(error) && error.code === "E_CLOSED") this.#forget(queue, writer);
      throw error;
    }
  }

  /** The queues with a writer here, and the partitions each holds. */
  held(): Map<string, number[]> {
    return new Map([...this.#open.values()].map((w) => [w.name, w.held()]));
  }

  /** Closes the writer of `queue` (before a delete); the next produce opens it again. */
  async closeQueue(queue: string): Promise<void> {
    const writer = this.#writers.get(queue);
    this.#writers.delete(queue);
    this.#open.delete(queue);
    await writer?.then(
      (w) => w.close(),
      () => {},
    );
  }

  async close(): Promise<void> {
    const writers = [...this.#writers.values()];
    this.#writers.clear();
    this.#open.clear();
    await Promise.all(
      writers.map((w) =>
        w.then(
          (writer) => writer.close(),
          () => {},
        ),
      ),
    );
  }

  /** The writers opened (not opening), by queue. */
  #open = new Map<string, PartitionedWriter>();

  #writer(queue: string): Promise<PartitionedWriter> {
    let writer = this.#writers.get(queue);
    if (!writer) {
      writer = this.driver().then((driver) =>
        PartitionedWriter.open(queue, { ...writerOptions(this.options, queue, driver), onLockLost: () => this.metrics && this.metrics.writerLocksLost++ }),
      );
      this.#writers.set(queue, writer);
      const opening = writer;
      writer.then(
        (w) => this.#open.set(queue, w),
        () => this.#writers.get(queue) === opening && this.#writers.delete(queue),
      );
    }
    return writer;
  }

  #forget(queue: string, writer: PartitionedWriter): void {
    if (this.#open.get(queue) !== writer) return;
    this.#open.delete(queue);
    this.#writers.delete(queue);
  }
}

/** The options of a queue's writer (ordinary or partitioned): the app's, with the queue's own retention. */
export function writerOptions(options: ResolvedQueueAppOptions, queue: string, driver: QueueDriver) {
  return {
    driver,
    durability: options.durability,
    compression: options.compression,
    compressionDictionary: options.compressionDictionary,
    zstd: options.zstd,
    idempotencyWindowMs: options.idempotencyWindowMs,
    maxDelayed: options.maxDelayed,
    retention: options.retentionFor(queue),
    onProblem: options.onProblem,
  };
}
