/**
 * The server's hold on a consumer of a partitioned queue (runtime/registry.ts keeps them with
 * the ordinary slots: same cap, idling and kind check). The engine's PartitionedConsumer and
 * PartitionedSharedConsumer hold the partitions (hand-over between instances); these add what
 * the HTTP layer needs: reads one at a time, an end for long polls, and messages read for a
 * client that went away given back.
 */
import type { LeasingStats } from "../src/consumers/types";
import type { PartitionedConsumer, PartitionedMessage, PartitionedSeekTarget } from "../src/consumers/ordered/partitioned";
import type { SeekTarget } from "../src/log/seek";
import type { PartitionedLeasedMessage, PartitionedLeaseRef, PartitionedSharedConsumer } from "../src/consumers/shared/partitioned";
import type { NackOptions } from "../src/consumers/shared/consumer";
import { ApiError, isTooManyFiles } from "./errors";
import { linkSignals, Mutex, type OrderedSlot } from "./consumer-slot";
import { settleAll, settledOf, type LeasingSlot, type Settled } from "./shared-slot";
import { StopSignal } from "../src/core/stop-signal";

/** What both partitioned slots share: the stop, the use count, and the end of a deleted consumer. */
abstract class PartitionedSlotBase<C extends { queue: string; name: string; close(): Promise<void> }> {
  readonly consumer: C;
  lastUsed = Date.now();
  protected active = 0;
  protected readonly stopSignal = new StopSignal();
  #stopReason: "closed" | "deleted" | undefined;
  #stopped: Promise<void> | undefined;
  readonly #onTooManyFiles: () => void;

  constructor(consumer: C, onTooManyFiles: () => void) {
    this.consumer = consumer;
    this.#onTooManyFiles = onTooManyFiles;
  }

  get idle(): boolean {
    return this.active === 0;
  }

  /** Nothing for the monitor: a partitioned queue's positions are per partition, and it reads those. */
  held(): undefined {
    return undefined;
  }

  get stopped(): boolean {
    return this.#stopReason !== undefined;
  }

  /** Ends the waits, then closes the consumer: its partitions are let go (what it handed out and was not committed comes again). */
  stop(reason: "closed" | "deleted"): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopReason = reason;
      this.stopSignal.abort();
      await this.beforeClose();
      await this.consumer.close();
    })();
    return this.#stopped;
  }

  protected beforeClose(): Promise<void> {
    return Promise.resolve();
  }

  protected async use<T>(run: () => Promise<T>): Promise<T> {
    if (this.#stopReason) this.ended();
    this.active++;
    try {
      return await run();
    } catch (error) {
      if (isTooManyFiles(error)) this.#onTooManyFiles();
      throw error;
    } finally {
      this.active--;
      this.lastUsed = Date.now();
    }
  }

  protected ended(): never[] {
    if (this.#stopReason === "deleted")
      throw new ApiError(404, "E_NOT_FOUND", `Consumer "${this.consumer.name}" of queue "${this.consumer.queue}" was deleted.`);
    return [];
  }
}

/** An ordered consumer of a partitioned queue: reads one at a time, in arrival order. */
export class PartitionedConsumerSlot extends PartitionedSlotBase<PartitionedConsumer> implements OrderedSlot {
  readonly kind = "ordered";
  readonly #mutex = new Mutex();

  override get idle(): boolean {
    return super.idle && this.#mutex.idle;
  }

  /**
   * Up to `max` messages of the partitions this server holds, waiting up to `timeoutMs` for the
   * first. Read for a client that has gone away: handed out again (rewind).
   */
  poll({
    max,
    maxBytes,
    raw,
    timeoutMs,
    signal,
  }: {
    max: number;
    maxBytes: number;
    raw?: boolean;
    timeoutMs: number;
    signal?: AbortSignal;
  }): Promise<PartitionedMessage[]> {
    return this.use(async () => {
      const linked = linkSignals(signal, this.stopSignal);
      const deadline = Date.now() + timeoutMs;
      try {
        if (!(await this.#mutex.acquire(linked.signal))) return this.ended();
        try {
          if (this.stopped) return this.ended();
          const messages = await this.consumer.poll({ max, maxBytes, raw, timeoutMs: Math.max(0, deadline - Date.now()), signal: linked.signal });
          if (messages.length === 0) return this.ended();
          if (signal?.aborted) {
            // Nobody will receive them: hand them out again (at-least-once, never lost).
            await this.consumer.rewind();
            return [];
          }
          return messages;
        } finally {
          this.#mutex.release();
        }
      } finally {
        linked.dispose();
      }
    });
  }

  /** Commits everything handed out, or what a composite cursor names. Returns what was committed, as a composite cursor. */
  commit(cursor?: string): Promise<string> {
    return this.use(async () => {
      const all = this.consumer.cursor;
      await this.consumer.commit(cursor);
      return cursor ?? all;
    });
  }

  /** Hands out again what was handed out and not committed, in the partitions held here (between reads). Returns the committed positions, as a composite cursor. */
  rewind(): Promise<string> {
    return this.use(async () => {
      await this.#mutex.acquire();
      try {
        await this.consumer.rewind();
        return this.consumer.cursor;
      } finally {
        this.#mutex.release();
      }
    });
  }

  /**
   * Moves every partition, or those a composite cursor names (between reads; see
   * `PartitionedConsumer.seek`: another target is `E_CURSOR`). Returns the positions saved, as a composite cursor.
   */
  seek(to: SeekTarget): Promise<string> {
    return this.use(async () => {
      await this.#mutex.acquire();
      try {
        return await this.consumer.seek(to as PartitionedSeekTarget);
      } finally {
        this.#mutex.release();
      }
    });
  }

  protected override async beforeClose(): Promise<void> {
    // The read in flight ends first (its wait was aborted).
    await this.#mutex.acquire();
    this.#mutex.release();
  }
}

/** A shared consumer of a partitioned queue: requests run at once (the engine orders its takes). */
export class PartitionedSharedSlot extends PartitionedSlotBase<PartitionedSharedConsumer> implements LeasingSlot {
  readonly kind = "shared";
  /** Leases handed out and not settled through this slot (acked, nacked): it is not idle while there are some. */
  #outstanding = 0;
  #leaseUntil = 0;

  override get idle(): boolean {
    return super.idle && (this.#outstanding === 0 || Date.now() > this.#leaseUntil);
  }

  /** What the partitions this server holds hold now, summed (see `PartitionedSharedConsumer.stats`). */
  readStats(): Promise<LeasingStats> {
    return Promise.resolve(this.consumer.stats);
  }

  lease(options: { max: number; maxBytes: number; leaseMs?: number; timeoutMs: number; signal?: AbortSignal }): Promise<PartitionedLeasedMessage[]> {
    return this.use(async () => {
      const linked = linkSignals(options.signal, this.stopSignal);
      try {
        const { max, maxBytes, leaseMs, timeoutMs } = options;
        const messages = await this.consumer.poll({ max, maxBytes, leaseMs, timeoutMs, signal: linked.signal });
        if (messages.length === 0) return this.ended();
        if (options.signal?.aborted) {
          // Nobody will receive them: they go to the next worker now, not after the lease.
          await Promise.all(messages.map((m) => this.consumer.nack(m, { release: true }).catch(() => {})));
          return [];
        }
        this.#outstanding += messages.length;
        this.#leaseUntil = Math.max(this.#leaseUntil, ...messages.map((m) => m.leaseUntil));
        return messages;
      } finally {
        linked.dispose();
      }
    });
  }

  /** Acknowledges each lease (one journal write per partition); a refused one is an error item. */
  async ack(refs: PartitionedLeaseRef[], results?: unknown[]): Promise<Settled<void>[]> {
    const errors = await this.use(() => this.consumer.ackAll(refs, results && { results }));
    this.#outstanding = Math.max(0, this.#outstanding - errors.filter((e) => !e).length);
    return settledOf(errors);
  }

  progress(ref: PartitionedLeaseRef, progress: unknown): Promise<void> {
    return this.use(() => this.consumer.progress(ref, progress));
  }

  nack(refs: PartitionedLeaseRef[], options: NackOptions): Promise<Settled<void>[]> {
    return this.#settle(refs, (ref) => this.consumer.nack(ref, options));
  }

  extend(refs: PartitionedLeaseRef[], leaseMs: number | undefined): Promise<Settled<number>[]> {
    return this.use(() => settleAll(refs.map((ref) => this.consumer.extend(ref, { leaseMs }))));
  }

  backOff(ms: number): Promise<number> {
    return this.use(() => this.consumer.backOff(ms));
  }

  async #settle(refs: PartitionedLeaseRef[], settle: (ref: PartitionedLeaseRef) => Promise<void>): Promise<Settled<void>[]> {
    const out = await this.use(() => settleAll(refs.map(settle)));
    this.#outstanding = Math.max(0, this.#outstanding - out.filter((r) => r.ok).length);
    return out;
  }
}
