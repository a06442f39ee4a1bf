import type { QueueConsumer } from "../src/consumers/ordered/consumer";
import type { ConsumedMessage, OrderedConsumer } from "../src/consumers/types";
import type { SeekTarget } from "../src/log/seek";
import type { Message } from "../src/format/message";
import { ApiError, isTooManyFiles } from "./errors";
import { StopSignal, type StopSignalLike } from "../src/core/stop-signal";
import type { HeldConsumer } from "./types";

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
 * The slot of an ordered consumer of either kind of queue (`ConsumerSlot`, and
 * `PartitionedConsumerSlot` whose messages carry `partition` and whose cursors are composite):
 * what the consume routes speak to.
 */
export interface OrderedSlot {
  readonly consumer: Pick<OrderedConsumer, "queue" | "name" | "takeMissed">;
  /** Up to `max` messages, waiting up to `timeoutMs` for the first; read for a client that went away: handed out again. */
  poll(options: PollOptions): Promise<ConsumedMessage[]>;
  /** Commits everything handed out, or up to `cursor`; resolves with what was committed, as a cursor. */
  commit(cursor?: string): Promise<string>;
  /** Hands out again what was not committed; resolves with the committed position, as a cursor. */
  rewind(): Promise<string>;
  /** Moves the consumer and saves it there; resolves with where it now is, as a cursor. */
  seek(to: SeekTarget): Promise<string>;
}

/**
 * One open consumer and the requests using it: reads are serialized (one at a time, in
 * arrival order); a request that is aborted while queued leaves the line.
 */
export class ConsumerSlot implements OrderedSlot {
  readonly consumer: QueueConsumer;
  lastUsed = Date.now();
  #active = 0;
  #mutex = new Mutex();
  #stop = new StopSignal();
  #stopReason: "closed" | "deleted" | undefined;
  #stopped: Promise<void> | undefined;
  /** Being handed over to another instance (`drain`): nothing more is handed out, commits still go through. */
  #draining = false;
  #finish!: () => void;
  readonly #finished = new Promise<void>((resolve) => (this.#finish = resolve));

  readonly #onTooManyFiles: () => void;
  readonly #onStopped: (() => void) | undefined;

  /** `onTooManyFiles`: a read ran out of file descriptors (the registry makes room); `onStopped`: called once it stopped (handover-slot.ts). */
  constructor(consumer: QueueConsumer, onTooManyFiles: () => void = () => {}, onStopped?: () => void) {
    this.consumer = consumer;
    this.#onTooManyFiles = onTooManyFiles;
    this.#onStopped = onStopped;
    // Lost (this process was paused past its lease): the registry opens it again, from the saved position.
    stopWhenLockLost(this);
  }

  /** Whether its consumer still holds its lock (see `QueueConsumer.holds`): once lost, the slot stops. */
  holds(): Promise<boolean> {
    return this.consumer.holds();
  }

  get idle(): boolean {
    return this.#active === 0 && this.#mutex.idle;
  }

  /** As the monitor sees it: its committed position, from memory. */
  held(): HeldConsumer {
    return { lastUsed: this.lastUsed, position: this.consumer.committed, shared: undefined };
  }

  get stopped(): boolean {
    return this.#stopReason !== undefined;
  }

  /** A read or a move in flight (it holds the mutex). */
  get reading(): boolean {
    return !this.#mutex.idle;
  }

  /**
   * Another instance asked for the consumer (handover-slot.ts): the waits end, and reads get
   * nothing until the slot stops, once what it handed out is committed (the commits still come here).
   */
  drain(): void {
    this.#draining = true;
    this.#stop.abort();
  }

  /**
   * Reads up to `max` messages; when there are none, waits up to `timeoutMs` for the first.
   * Messages read for a client that has gone away are handed out again (rewind).
   */
  async poll({ max, maxBytes, timeoutMs, signal, raw }: PollOptions): Promise<Message[]> {
    this.#active++;
    const linked = linkSignals(signal, this.#stop);
    const deadline = Date.now() + timeoutMs;
    try {
      // Not inside the mutex: the stop takes it. Ended once stopped: the next request takes the consumer back.
      if (this.#draining && !this.#stopReason) {
        await waitUntil(this.#finished, deadline, signal);
        return this.#ended();
      }
      if (!(await this.#mutex.acquire(linked.signal))) return this.#ended();
      try {
        if (this.#stopReason) return this.#ended();
        // The time spent queued for the mutex counts against the client's timeout.
        const messages = await this.consumer.poll({ max, maxBytes, raw, signal: linked.signal, timeoutMs: Math.max(0, deadline - Date.now()) });
        if (messages.length === 0) return this.#ended();
        if (signal?.aborted) {
          // Nobody will receive them: hand them out again (at-least-once, never lost).
          await this.consumer.rewind();
          return [];
        }
        return messages;
      } finally {
        this.#mutex.release();
      }
    } catch (error) {
      if (isTooManyFiles(error)) this.#onTooManyFiles();
      throw error;
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
  rewind(): Promise<string> {
    return this.#move(() => this.consumer.rewind());
  }

  /** Moves the consumer (see the engine's `seek`), between reads. Returns where it now is, as a cursor. */
  seek(to: SeekTarget): Promise<string> {
    return this.#move(() => this.consumer.seek(to));
  }

  /** Runs a move of the reading position between reads (one at a time with them). */
  async #move(move: () => Promise<unknown>): Promise<string> {
    if (this.#stopReason) this.#ended();
    this.#active++;
    try {
      await this.#mutex.acquire();
      try {
        await move();
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
      // `then` runs once the consumer's commits are done and its files closed, lock still held:
      // a commit in flight cannot write the position file again after a delete removed it.
      await this.consumer.close({ beforeRelease: then }).finally(() => {
        this.#finish();
        this.#onStopped?.();
      });
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

/**
 * Stops `slot` (as closed) once its consumer's lock is found lost, however it is found: a slot
 * that kept it would answer every request with the loss (409) until it idled out, though the
 * lock may be free again; stopped, it is forgotten, and the next request opens the consumer
 * anew (taking the lock, a new epoch, if nobody has it). A close that fails is the lost lock's.
 */
export function stopWhenLockLost(slot: { consumer: { whenLockLost(listener: () => void): void }; stop(reason: "closed"): Promise<void> }): void {
  slot.consumer.whenLockLost(() => void slot.stop("closed").catch(() => {}));
}

// --- Internal helpers ---

/** Resolves when `done` does, at `deadline`, or when `signal` aborts, whichever comes first. */
export async function waitUntil(done: Promise<void>, deadline: number, signal: AbortSignal | undefined): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  try {
    await Promise.race([
      done,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        onAbort = resolve;
        signal?.addEventListener("abort", onAbort, { once: true });
      }),
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

/** A FIFO lock whose waiters can give up (abort). */
export class Mutex {
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

/**
 * One signal that aborts when either does; `dispose` removes the listeners (settled: later aborts are no-ops).
 * Not `AbortSignal.any`: on Node 20 each call leaves an entry in the long-lived stop signal's
 * dependants that GC never prunes (nodejs/node#55351; test/http/consumer-slot.test.ts).
 */
export function linkSignals(a: AbortSignal | undefined, b: StopSignalLike): { signal: AbortSignal; dispose: () => void } {
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
