/**
 * The writers of a server's ordinary queues: one hold per queue (src/writer/partitioned.ts,
 * `PartitionedWriter.ordinary`, as one partition's), whose writer is taken at the first produce
 * (or when a queue has delayed messages waiting), handed over to another instance that asks for
 * it, and dropped when it fails on storage, so that the next produce reopens the queue and
 * recovery runs. The registry (registry.ts) owns the pool: it says when a purge or delete holds a queue.
 */
import type { QueueDriver } from "../src/core/driver";
import { VQueueError } from "../src/core/errors";
import type { MessageInput, MessagePosition } from "../src/format/message";
import { delayedPath, sideJournalPath } from "../src/storage/paths";
import type { ProduceOptions, ProduceResult } from "../src/writer/produce";
import type { Schedule, ScheduleInput } from "../src/writer/schedules";
import { PartitionedWriter } from "../src/writer/partitioned";
import type { QueueWriter } from "../src/writer/writer";
import { isTooManyFiles } from "./errors";
import type { ServerMetrics } from "./metrics/server-metrics";
import type { ResolvedQueueAppOptions } from "./options";
import { writerOptions } from "./partitioned-writers";

/** What the pool needs of its owner. */
export interface WriterPoolHost {
  options: ResolvedQueueAppOptions;
  metrics: ServerMetrics | undefined;
  driver(): Promise<QueueDriver>;
  /** Resolves once no purge or delete of `queue` is running. */
  adminDone(queue: string): Promise<void>;
  /** Out of descriptors while writing: make room. */
  relieve(): void;
  /** The server is closing: nothing is opened or retried any more. */
  isClosing(): boolean;
}

export class WriterPool {
  readonly #host: WriterPoolHost;
  readonly #writers = new Map<string, Promise<PartitionedWriter>>();
  /** Queues whose delayed messages `wakeDelayed` looked for (while their writer lives: forgotten when it closes). */
  readonly #delayedChecked = new Set<string>();

  constructor(host: WriterPoolHost) {
    this.#host = host;
  }

  /**
   * The queue's writer (the queue created on first use, after a purge or delete of it running
   * now), taken from another instance on request when it holds it. For a caller that writes
   * through it at once (a redrive): the writer may be handed over again after.
   */
  writer(queue: string): Promise<QueueWriter> {
    return this.#write(queue, (writer) => Promise.resolve(writer));
  }

  /** Pushes through the queue's one writer (taken on first use, by request from another instance holding it). */
  push(queue: string, messages: MessageInput[]): Promise<MessagePosition[]> {
    return this.#write(queue, (writer) => writer.pushBatch(messages));
  }

  /** A produce with a delay or an idempotency key (src/writer/produce.ts), as `push`. */
  produce(queue: string, messages: MessageInput[], options: ProduceOptions): Promise<ProduceResult> {
    return this.#write(queue, (writer) => writer.produce(messages, options));
  }

  /** Sets a schedule of the queue (src/writer/schedules.ts) through its one writer, taken as `push` takes it. */
  schedule(queue: string, name: string, input: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    return this.#write(queue, (writer) => writer.schedule(name, input));
  }

  /** Removes a schedule of the queue through its writer: false when there was none. */
  unschedule(queue: string, name: string): Promise<boolean> {
    return this.#write(queue, (writer) => writer.unschedule(name));
  }

  /**
   * Takes the queue's writer for its schedules when no other instance holds it (its holder died,
   * or was paused past its lease), never waiting for a holder: only a writer fires them.
   */
  async holdForSchedules(queue: string): Promise<void> {
    if (this.#host.isClosing()) return;
    await (await this.#hold(queue)).holdIfFree();
  }

  /**
   * Takes the queue's writer when it has delayed messages waiting (a consume came first after a
   * restart) and no other instance holds it: only a writer moves them into the queue when due.
   * Looked at once per queue while its writer lives here: a writer closed here (purge, delete)
   * makes the next request look again.
   */
  async wakeDelayed(queue: string): Promise<void> {
    if (this.#host.isClosing() || this.#delayedChecked.has(queue)) return;
    this.#delayedChecked.add(queue);
    const driver = await this.#host.driver();
    // Its file, or the copy a compaction cut short left (side-log.ts): the next writer finishes it.
    for (const path of [delayedPath(queue), sideJournalPath(delayedPath(queue))]) {
      const log = await driver.openLog(path, { create: false }).catch(() => undefined);
      if (await log?.size().finally(() => log.close()))
        return void (await this.#hold(queue)
          .then((writer) => writer.holdIfFree())
          .catch(() => {}));
    }
  }

  /** Closes the queue's writer for a purge or delete (taken out now: a writer asked for from here on waits for the admin call). */
  closeForAdmin(queue: string): Promise<void> {
    const writer = this.#writers.get(queue);
    this.#writers.delete(queue);
    this.#delayedChecked.delete(queue);
    return writer
      ? writer.then(
          (w) => w.close(),
          () => {},
        )
      : Promise.resolve();
  }

  /** After a purge or delete: delayed messages (a purge keeps them) need a writer to be moved when due. */
  afterAdmin(queue: string): void {
    this.#delayedChecked.delete(queue);
    void this.wakeDelayed(queue);
  }

  /** The queues with a writer hold here (its writer taken at its first write). */
  queues(): Set<string> {
    return new Set(this.#writers.keys());
  }

  /** Closes every writer. */
  async close(): Promise<void> {
    const writers = [...this.#writers.values()];
    this.#writers.clear();
    await Promise.all(
      writers.map((w) =>
        w.then(
          (writer) => writer.close(),
          () => {},
        ),
      ),
    );
  }

  /** The hold of this server on the queue's writer (taken at its first write, handed over on request), made on first use. */
  #hold(queue: string): Promise<PartitionedWriter> {
    let writer = this.#writers.get(queue);
    if (!writer) {
      const host = this.#host;
      writer = host
        .adminDone(queue)
        .then(() => host.driver())
        // Counted however the loss is found (a renewal after a pause, a check before a write, a fenced write).
        .then((driver) =>
          PartitionedWriter.ordinary(queue, {
            ...writerOptions(host.options, queue, driver),
            onLockLost: () => host.metrics && host.metrics.writerLocksLost++,
          }),
        );
      this.#writers.set(queue, writer);
      writer.catch(() => {
        if (this.#writers.get(queue) === writer) this.#writers.delete(queue);
      });
    }
    return writer;
  }

  async #write<T>(queue: string, write: (writer: QueueWriter) => Promise<T>, retry = true): Promise<T> {
    const writer = await this.#hold(queue);
    try {
      return await writer.write(write);
    } catch (error) {
      // Closed under it (a purge or delete): nothing was written; once more with the next writer.
      if (retry && VQueueError.isError(error) && error.code === "E_CLOSED" && !this.#host.isClosing()) return this.#write(queue, write, false);
      if (VQueueError.isError(error) && error.code === "E_FENCED" && this.#host.metrics) this.#host.metrics.fencedWrites++;
      if (isTooManyFiles(error)) this.#host.relieve();
      throw error;
    }
  }
}
