import type { LeasedMessage, LeaseRef, LeasingStats, NackOptions, SharedStats } from "../src/consumers/types";
import type { SharedConsumer } from "../src/consumers/shared/consumer";
import { ApiError, isTooManyFiles } from "./errors";
import { linkSignals, stopWhenLockLost, waitUntil } from "./consumer-slot";
import { StopSignal } from "../src/core/stop-signal";
import type { HeldConsumer } from "./types";

/**
 * The slot of a shared consumer of either kind of queue (`SharedSlot`, `PartitionedSharedSlot`):
 * what the lease routes and server code speak to. A partitioned queue's leases and refs carry
 * their `partition`.
 */
export interface LeasingSlot {
  /** Leases up to `max` (bodies up to `maxBytes`, at least one), waiting up to `timeoutMs` for the first. Leased for a client that went away: given back at once. */
  lease(options: { max: number; maxBytes: number; leaseMs?: number; timeoutMs: number; signal?: AbortSignal }): Promise<LeasedMessage[]>;
  /** Acks each lease (`results[i]`: the result of `refs[i]`, undefined for none); one refused is an error item, not a failure of the batch. */
  ack(refs: LeaseRef[], results?: unknown[]): Promise<Settled<void>[]>;
  /** A progress update of a leased message (durable when resolved); `E_LEASE` unless it is leased now. */
  progress(ref: LeaseRef, progress: unknown): Promise<void>;
  nack(refs: LeaseRef[], options: NackOptions): Promise<Settled<void>[]>;
  extend(refs: LeaseRef[], leaseMs: number | undefined): Promise<Settled<number>[]>;
  /** Hands nothing out to anyone for `ms` (see `SharedConsumer.backOff`); resolves with its end (ms since the epoch). */
  backOff(ms: number): Promise<number>;
  /**
   * What the consumer holds now (a partitioned one: summed over the partitions this server holds;
   * a plain one's has its `ackFloor`). Of a plain consumer another instance holds: taken here first.
   */
  readStats(): Promise<SlotStats>;
}

/** What `LeasingSlot.readStats` answers. */
export type SlotStats = LeasingStats & { ackFloor?: SharedStats["ackFloor"] };

/** `LeasingSlot`, by its earlier name. */
export type AnySharedSlot = LeasingSlot;

/**
 * One shared consumer the server holds (its lock) and the requests using it. Unlike an
 * ordered slot, requests run concurrently: the engine orders its own takes. It stays open
 * while leases run or messages are tracked above its floor (`idle` is false then): closing it
 * would end those leases early, and the messages would come again at the next open.
 */
export class SharedSlot implements LeasingSlot {
  readonly kind = "shared";
  readonly consumer: SharedConsumer;
  lastUsed = Date.now();
  #active = 0;
  #stop = new StopSignal();
  #stopReason: "closed" | "deleted" | undefined;
  #stopped: Promise<void> | undefined;
  /** Being handed over to another instance (`drain`): nothing more is leased, acks still go through. */
  #draining = false;
  /** Takes in flight (what they lease is not counted in `inFlight` yet). */
  #leasing = 0;
  #finish!: () => void;
  readonly #finished = new Promise<void>((resolve) => (this.#finish = resolve));
  readonly #onTooManyFiles: () => void;
  readonly #onStopped: (() => void) | undefined;

  /** `onStopped`: called once it stopped (handover-slot.ts). */
  constructor(consumer: SharedConsumer, onTooManyFiles: () => void = () => {}, onStopped?: () => void) {
    this.consumer = consumer;
    this.#onTooManyFiles = onTooManyFiles;
    this.#onStopped = onStopped;
    // Lost (this process was paused past its lease): the registry opens it again, from the saved state.
    stopWhenLockLost(this);
  }

  /** Whether its consumer still holds its lock (see `QueueConsumer.holds`): once lost, the slot stops. */
  holds(): Promise<boolean> {
    return this.consumer.holds();
  }

  get idle(): boolean {
    if (this.#active > 0) return false;
    const { window } = this.consumer.stats;
    return window === 0;
  }

  get stopped(): boolean {
    return this.#stopReason !== undefined;
  }

  /** A take in flight: what it leases is handed out, then acknowledged, before a hand-over. */
  get reading(): boolean {
    return this.#leasing > 0;
  }

  /** Another instance asked for the consumer (handover-slot.ts): the waits end, and nothing more is leased until the slot stops. */
  drain(): void {
    this.#draining = true;
    this.#stop.abort();
  }

  readStats(): Promise<SharedStats> {
    return Promise.resolve(this.stats);
  }

  get stats(): SharedStats {
    return this.consumer.stats;
  }

  /** As the monitor sees it: its ack floor and live stats, from memory. */
  held(): HeldConsumer {
    const shared = this.consumer.stats;
    return { lastUsed: this.lastUsed, position: shared.ackFloor, shared };
  }

  /** Leases up to `max` (bodies up to `maxBytes`, at least one), waiting up to `timeoutMs` for the first. Leased for a client that went away: given back at once. */
  lease(options: { max: number; maxBytes: number; leaseMs?: number; timeoutMs: number; signal?: AbortSignal }): Promise<LeasedMessage[]> {
    return this.#use(async () => {
      const { max, maxBytes, leaseMs, timeoutMs } = options;
      // Ended once stopped: the next request takes the consumer back.
      if (this.#draining && !this.#stopReason) {
        await waitUntil(this.#finished, Date.now() + timeoutMs, options.signal);
        return this.#ended();
      }
      const linked = linkSignals(options.signal, this.#stop);
      this.#leasing++;
      try {
        const messages = await this.consumer.poll({ max, maxBytes, leaseMs, timeoutMs, signal: linked.signal }).finally(() => this.#leasing--);
        if (messages.length === 0) return this.#ended();
        if (options.signal?.aborted) {
          // Nobody will receive them: they go to the next worker now, not after the lease.
          await Promise.all(messages.map((m) => this.consumer.nack(m, { release: true }).catch(() => {})));
          return [];
        }
        return messages;
      } finally {
        linked.dispose();
      }
    });
  }

  /** Acks each lease; an ack refused (E_LEASE) is an error item, not a failure of the batch. */
  ack(refs: LeaseRef[], results?: unknown[]): Promise<Settled<void>[]> {
    return this.#use(async () => settledOf(await this.consumer.ackAll(refs, results && { results })));
  }

  progress(ref: LeaseRef, progress: unknown): Promise<void> {
    return this.#use(() => this.consumer.progress(ref, progress));
  }

  nack(refs: LeaseRef[], options: NackOptions): Promise<Settled<void>[]> {
    return this.#use(() => settleAll(refs.map((ref) => this.consumer.nack(ref, options))));
  }

  extend(refs: LeaseRef[], leaseMs: number | undefined): Promise<Settled<number>[]> {
    return this.#use(() => settleAll(refs.map((ref) => this.consumer.extend(ref, { leaseMs }))));
  }

  backOff(ms: number): Promise<number> {
    return this.#use(() => this.consumer.backOff(ms));
  }

  /** Ends the waits, then closes the consumer (its leases end; unacknowledged messages come again at the next open). */
  stop(reason: "closed" | "deleted"): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopReason = reason;
      this.#stop.abort();
      await this.consumer.close().finally(() => {
        this.#finish();
        this.#onStopped?.();
      });
    })();
    return this.#stopped;
  }

  async #use<T>(run: () => Promise<T>): Promise<T> {
    if (this.#stopReason) this.#ended();
    this.#active++;
    try {
      return await run();
    } catch (error) {
      if (isTooManyFiles(error)) this.#onTooManyFiles();
      throw error;
    } finally {
      this.#active--;
      this.lastUsed = Date.now();
    }
  }

  #ended(): never[] {
    if (this.#stopReason === "deleted") {
      throw new ApiError(404, "E_NOT_FOUND", `Consumer "${this.consumer.name}" of queue "${this.consumer.queue}" was deleted.`);
    }
    return [];
  }
}

/** One outcome of a batch item: its value, or the error it failed with. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** `ackAll`'s answer (an error per ref, or undefined when done) as settled items. */
export function settledOf(errors: (Error | undefined)[]): Settled<void>[] {
  return errors.map((error) => (error ? { ok: false, error } : { ok: true, value: undefined }));
}

export async function settleAll<T>(promises: Promise<T>[]): Promise<Settled<T>[]> {
  const out = await Promise.allSettled(promises);
  return out.map((r) => (r.status === "fulfilled" ? { ok: true, value: r.value } : { ok: false, error: r.reason as unknown }));
}
