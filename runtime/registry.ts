import { QueueConsumer } from "../src/consumer";
import type { QueueDriver } from "../src/driver";
import type { Message, MessageInput, MessagePosition } from "../src/message";
import { VQueueError } from "../src/errors";
import { popInfoPath } from "../src/paths";
import { QueueWriter } from "../src/writer";
import { ApiError } from "./errors";
import type { ResolvedQueueAppOptions } from "./options";

export interface PollOptions {
  max: number;
  maxBytes: number;
  timeoutMs: number;
  /** The request's signal: a client that goes away ends its wait. */
  signal?: AbortSignal;
  /** Text bodies as undecoded bytes (see the engine's `read({ raw })`). */
  raw?: boolean;
}

/**
 * The queues an app has open: one writer per queue (opened on first produce) and one reader
 * per consumer name (opened on first consume), as the engine's locks allow. Closed by `close()`.
 */
export class QueueRegistry {
  readonly options: ResolvedQueueAppOptions;
  #driver: Promise<QueueDriver> | undefined;
  #writers = new Map<string, Promise<QueueWriter>>();
  #consumers = new Map<string, Promise<ConsumerSlot>>();
  #closingSlots = new Map<string, Promise<void>>();
  #sweep: ReturnType<typeof setInterval> | undefined;
  #inflight = 0;
  #drained: (() => void) | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: ResolvedQueueAppOptions) {
    this.options = options;
    if (options.consumerIdleMs > 0) {
      this.#sweep = setInterval(() => void this.#closeIdle(), Math.min(options.consumerIdleMs, 60_000));
      (this.#sweep as { unref?: () => void }).unref?.();
    }
  }

  get closing(): boolean {
    return this.#closing !== undefined;
  }

  /** The storage: the given driver, or the Node fs driver on `dir` (loaded on first use). */
  driver(): Promise<QueueDriver> {
    this.#driver ??= this.options.driver
      ? Promise.resolve(this.options.driver)
      : import("../adapters/drivers/fs").then((m) => m.default({ dir: this.options.dir }));
    return this.#driver;
  }

  /** Counts a request in, so that `close()` waits for it. Returns its `done`. */
  enter(): () => void {
    if (this.#closing) throw new ApiError(503, "E_SHUTDOWN", "The server is shutting down.");
    this.#inflight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#inflight === 0) this.#drained?.();
    };
  }

  /** The queue's writer, opened (and the queue created) on first use. */
  writer(queue: string): Promise<QueueWriter> {
    let writer = this.#writers.get(queue);
    if (!writer) {
      writer = this.driver().then((driver) =>
        QueueWriter.open(queue, { driver, durability: this.options.durability, onProblem: this.options.onProblem }),
      );
      this.#writers.set(queue, writer);
      writer.catch(() => this.#writers.get(queue) === writer && this.#writers.delete(queue));
    }
    return writer;
  }

  /**
   * Pushes through the queue's one writer (opened on first use). A writer that failed on
   * storage is dropped, so the next push reopens the queue (and recovery runs).
   */
  async push(queue: string, messages: MessageInput[]): Promise<MessagePosition[]> {
    const writer = await this.writer(queue);
    try {
      return await writer.pushBatch(messages);
    } catch (error) {
      if (!VQueueError.isError(error) || (error.code !== "E_MESSAGE" && error.code !== "E_OPTION")) await this.dropWriter(queue, writer);
      throw error;
    }
  }

  /** Forgets a writer that failed (it refuses pushes after a storage error), so the next push reopens. */
  async dropWriter(queue: string, writer: QueueWriter): Promise<void> {
    const current = this.#writers.get(queue);
    if (!current || (await current.catch(() => undefined)) !== writer) return;
    this.#writers.delete(queue);
    await writer.close().catch((error: unknown) => this.options.logger.error("[v-queue] [http] closing a failed writer:", error));
  }

  /** The consumer's slot, opened (and the consumer created) on first use. */
  async consumer(queue: string, name: string, create = true): Promise<ConsumerSlot> {
    for (;;) {
      const slot = await this.#consumerSlot(queue, name, create);
      // Closed as idle just now: open it again (unless the whole app is closing).
      if (!slot.stopped || this.#closing) return slot;
    }
  }

  #consumerSlot(queue: string, name: string, create: boolean): Promise<ConsumerSlot> {
    // Closing: the slots were stopped; a new one would keep a long poll (and the close) waiting.
    if (this.#closing) return Promise.reject(new ApiError(503, "E_SHUTDOWN", "The server is shutting down."));
    const key = `${queue}\u0000${name}`;
    let slot = this.#consumers.get(key);
    if (!slot) {
      const pendingClose = this.#closingSlots.get(key);
      slot = (async () => {
        await pendingClose;
        const driver = await this.driver();
        const consumer = await QueueConsumer.open(queue, name, {
          driver,
          create,
          start: this.options.start,
          syncCommits: this.options.syncCommits,
          onProblem: this.options.onProblem,
        });
        return new ConsumerSlot(consumer);
      })();
      this.#consumers.set(key, slot);
      slot.catch(() => this.#consumers.get(key) === slot && this.#consumers.delete(key));
    }
    return slot;
  }

  /**
   * Deletes a consumer: ends its waits, removes its saved position, releases it.
   * Holds the consumer's lock while removing, so no other process is using it.
   */
  async deleteConsumer(queue: string, name: string): Promise<void> {
    const key = `${queue}\u0000${name}`;
    let slot = await this.#consumerSlot(queue, name, false);
    // Closed as idle just now: its close runs without our removal; reopen it (after that close).
    while (slot.stopped) slot = await this.#consumerSlot(queue, name, false);
    this.#consumers.delete(key);
    const driver = await this.driver();
    const closed = slot.stop("deleted", async () => {
      await driver.remove(popInfoPath(queue, name));
    });
    this.#closingSlots.set(key, closed);
    try {
      await closed;
    } finally {
      if (this.#closingSlots.get(key) === closed) this.#closingSlots.delete(key);
    }
  }

  /** Ends every wait, lets requests in flight finish (their writes included), then closes every file. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#sweep) clearInterval(this.#sweep);
      const slots = [...this.#consumers.values()];
      this.#consumers.clear();
      const stopping = slots.map((s) => s.then((slot) => slot.stop("closed"), () => {}));
      if (this.#inflight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
      await Promise.all([...stopping, ...this.#closingSlots.values()]);
      const writers = [...this.#writers.values()];
      this.#writers.clear();
      await Promise.all(writers.map((w) => w.then((writer) => writer.close(), () => {})));
      await (await this.#driver?.catch(() => undefined))?.dispose?.();
    })();
    return this.#closing;
  }

  async #closeIdle(): Promise<void> {
    const now = Date.now();
    for (const [key, pending] of this.#consumers) {
      const slot = await pending.catch(() => undefined);
      if (!slot || !slot.idle || now - slot.lastUsed < this.options.consumerIdleMs) continue;
      if (this.#consumers.get(key) !== pending) continue;
      this.#consumers.delete(key);
      const closed = slot.stop("closed");
      this.#closingSlots.set(key, closed);
      void closed.finally(() => this.#closingSlots.get(key) === closed && this.#closingSlots.delete(key));
    }
  }
}

/**
 * One open consumer and the requests using it: reads are serialized (one at a time, in
 * arrival order); a request that is aborted while queued leaves the line.
 */
export class ConsumerSlot {
  readonly consumer: QueueConsumer;
  lastUsed = Date.now();
  #active = 0;
  #mutex = new Mutex();
  #stop = new AbortController();
  #stopReason: "closed" | "deleted" | undefined;
  #stopped: Promise<void> | undefined;

  constructor(consumer: QueueConsumer) {
    this.consumer = consumer;
  }

  get idle(): boolean {
    return this.#active === 0 && this.#mutex.idle;
  }

  get stopped(): boolean {
    return this.#stopReason !== undefined;
  }

  /**
   * Reads up to `max` messages; when there are none, waits up to `timeoutMs` for the first.
   * Messages read for a client that has gone away are handed out again (rewind).
   */
  async poll({ max, maxBytes, timeoutMs, signal, raw }: PollOptions): Promise<Message[]> {
    this.#active++;
    const linked = linkSignals(signal, this.#stop.signal);
    const deadline = Date.now() + timeoutMs;
    try {
      if (!(await this.#mutex.acquire(linked.signal))) return this.#ended();
      try {
        for (;;) {
          if (this.#stopReason) return this.#ended();
          const messages = await this.consumer.read({ max, maxBytes, raw });
          if (messages.length > 0) {
            if (signal?.aborted) {
              // Nobody will receive them: hand them out again (at-least-once, never lost).
              await this.consumer.rewind();
              return [];
            }
            return messages;
          }
          const remaining = deadline - Date.now();
          if (remaining <= 0 || linked.signal.aborted) return this.#ended();
          if (!(await this.consumer.wait({ signal: linked.signal, timeoutMs: remaining }))) return this.#ended();
        }
      } finally {
        this.#mutex.release();
      }
    } finally {
      linked.dispose();
      this.#active--;
      this.lastUsed = Date.now();
    }
  }

  /** Commits everything handed out, or up to `cursor`. */
  async commit(cursor?: string): Promise<string> {
    if (this.#stopReason) this.#ended();
    this.#active++;
    try {
      await this.consumer.commit(cursor);
      return cursor ?? this.consumer.cursor;
    } finally {
      this.#active--;
      this.lastUsed = Date.now();
    }
  }

  /** Hands out again everything after the saved position (after a client lost a batch). Returns that position's cursor. */
  async rewind(): Promise<string> {
    if (this.#stopReason) this.#ended();
    this.#active++;
    try {
      await this.#mutex.acquire();
      try {
        await this.consumer.rewind();
        return this.consumer.cursor;
      } finally {
        this.#mutex.release();
      }
    } finally {
      this.#active--;
      this.lastUsed = Date.now();
    }
  }

  /** Ends the waits, lets the current read finish, runs `then` with the consumer still locked, closes it. */
  stop(reason: "closed" | "deleted", then?: () => Promise<void>): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopReason = reason;
      this.#stop.abort();
      await this.#mutex.acquire();
      try {
        await then?.();
      } finally {
        await this.consumer.close();
      }
    })();
    return this.#stopped;
  }

  #ended(): Message[] {
    if (this.#stopReason === "deleted") {
      throw new ApiError(404, "E_NOT_FOUND", `Consumer "${this.consumer.name}" of queue "${this.consumer.queue}" was deleted.`);
    }
    return [];
  }
}

// --- Internal helpers ---

/** A FIFO lock whose waiters can give up (abort). */
class Mutex {
  #locked = false;
  #waiters: (() => void)[] = [];

  get idle(): boolean {
    return !this.#locked;
  }

  acquire(signal?: AbortSignal): Promise<boolean> {
    if (!this.#locked) {
      this.#locked = true;
      return Promise.resolve(true);
    }
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onAbort = () => {
        const i = this.#waiters.indexOf(grant);
        if (i >= 0) this.#waiters.splice(i, 1);
        resolve(false);
      };
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve(true);
      };
      this.#waiters.push(grant);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#locked = false;
  }
}

/** One signal that aborts when either does; `dispose` removes the listeners (settled: later aborts are no-ops). */
function linkSignals(a: AbortSignal | undefined, b: AbortSignal): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const abort = () => controller.abort();
  if (a?.aborted || b.aborted) controller.abort();
  a?.addEventListener("abort", abort, { once: true });
  b.addEventListener("abort", abort, { once: true });
  return {
    signal: controller.signal,
    dispose: () => {
      a?.removeEventListener("abort", abort);
      b.removeEventListener("abort", abort);
    },
  };
}
