/**
 * The writers of a server's ordinary queues: one per queue, opened on first produce (or when a
 * queue has delayed messages waiting) and dropped when it fails on storage, so that the next
 * produce reopens the queue and recovery runs. The registry (registry.ts) owns the pool: it says
 * when a purge or delete holds a queue, and how to retry an open that ran out of descriptors.
 */
import type { QueueDriver } from "../src/core/driver";
import { VQueueError } from "../src/core/errors";
import type { MessageInput, MessagePosition } from "../src/format/message";
import { delayedPath, sideJournalPath } from "../src/storage/paths";
import type { ProduceOptions, ProduceResult } from "../src/writer/produce";
import { QueueWriter } from "../src/writer/writer";
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
  /** Runs `open`; on EMFILE, makes room and tries once more. */
  relieved<T>(open: () => Promise<T>): Promise<T>;
  /** Out of descriptors while writing: make room. */
  relieve(): void;
  /** The server is closing: nothing is opened or retried any more. */
  isClosing(): boolean;
}

export class WriterPool {
  readonly #host: WriterPoolHost;
  readonly #writers = new Map<string, Promise<QueueWriter>>();
  /** Queues whose delayed messages `wakeDelayed` looked for (while their writer lives: forgotten when it closes). */
  readonly #delayedChecked = new Set<string>();

  constructor(host: WriterPoolHost) {
    this.#host = host;
  }

  /** The queue's writer, opened (and the queue created) on first use, after a purge or delete of it running now. */
  writer(queue: string): Promise<QueueWriter> {
    let writer = this.#writers.get(queue);
    if (!writer) {
      const host = this.#host;
      writer = host
        .adminDone(queue)
        .then(() => host.driver())
        .then((driver) => host.relieved(() => QueueWriter.open(queue, writerOptions(host.options, queue, driver))))
        .then((opened) => {
          // Counted however the loss is found (a renewal after a pause, the check below, a fenced write).
          opened.whenLockLost(() => host.metrics && host.metrics.writerLocksLost++);
          return opened;
        });
      this.#writers.set(queue, writer);
      writer.catch(() => {
        this.#delayedChecked.delete(queue);
        if (this.#writers.get(queue) === writer) this.#writers.delete(queue);
      });
    }
    return writer;
  }

  /** Pushes through the queue's one writer (opened on first use). A writer that failed on storage is dropped. */
  push(queue: string, messages: MessageInput[]): Promise<MessagePosition[]> {
    return this.#write(queue, (writer) => writer.pushBatch(messages));
  }

  /** A produce with a delay or an idempotency key (src/writer/produce.ts), as `push`. */
  produce(queue: string, messages: MessageInput[], options: ProduceOptions): Promise<ProduceResult> {
    return this.#write(queue, (writer) => writer.produce(messages, options));
  }

  /**
   * Opens the queue's writer when it has delayed messages waiting (a consume came first after a
   * restart): only a writer moves them into the queue when due. Looked at once per queue while
   * its writer lives: a writer closed here (dropped, purge, delete) makes the next request look again.
   */
  async wakeDelayed(queue: string): Promise<void> {
    if (this.#writers.has(queue) || this.#host.isClosing() || this.#delayedChecked.has(queue)) return;
    this.#delayedChecked.add(queue);
    const driver = await this.#host.driver();
    // Its file, or the copy a compaction cut short left (side-log.ts): the next writer finishes it.
    for (const path of [delayedPath(queue), sideJournalPath(delayedPath(queue))]) {
      const log = await driver.openLog(path, { create: false }).catch(() => undefined);
      if (await log?.size().finally(() => log.close())) return void (await this.writer(queue).catch(() => {}));
    }
  }

  /** Forgets a writer that failed (it refuses pushes after a storage error), so the next push reopens. */
  async drop(queue: string, writer: QueueWriter): Promise<void> {
    const current = this.#writers.get(queue);
    if (!current || (await current.catch(() => undefined)) !== writer) return;
    this.#writers.delete(queue);
    this.#delayedChecked.delete(queue);
    await writer.close().catch((error: unknown) => this.#host.options.logger.error("[v-queue] [http] closing a failed writer:", error));
  }

  /** Closes the queue's writer for a purge or delete (taken out now: a writer asked for from here on waits for the admin call). */
  closeForAdmin(queue: string): Promise<void> {
    const writer = this.#writers.get(queue);
    this.#writers.delete(queue);
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

  /** The queues with a writer here (opening or open). */
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

  async #write<T>(queue: string, write: (writer: QueueWriter) => Promise<T>, retry = true): Promise<T> {
    let writer = await this.writer(queue);
    // Its lock lapsed and was taken meanwhile (an idle isolate in workerd): opened again before writing.
    if (!(await writer.holds())) {
      await this.drop(queue, writer);
      writer = await this.writer(queue);
    }
    try {
      return await write(writer);
    } catch (error) {
      // Closed under it (a purge or delete): nothing was written; once more with the next writer.
      if (retry && VQueueError.isError(error) && error.code === "E_CLOSED" && !this.#host.isClosing()) return this.#write(queue, write, false);
      if (VQueueError.isError(error) && error.code === "E_FENCED" && this.#host.metrics) this.#host.metrics.fencedWrites++;
      if (!VQueueError.isError(error) || !["E_MESSAGE", "E_OPTION", "E_FULL"].includes(error.code)) await this.drop(queue, writer);
      if (isTooManyFiles(error)) this.#host.relieve();
      throw error;
    }
  }
}
