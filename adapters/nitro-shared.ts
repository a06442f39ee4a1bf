/**
 * Shared consumers in a Nitro app's server code, without HTTP: `useVQueue().shared(...)` and
 * `useVQueue().worker(...)` reach the one SharedConsumer the API uses (the server's registry
 * holds its lock), through its slot, asked for again at each call (an idle slot may be closed).
 */
import type { QueueHandler } from "../runtime/index";
import type { SharedSlot } from "../runtime/shared-slot";
import type { LeasedMessage, LeaseRef, NackOptions, SharedStats } from "../src/shared-consumer";
import { checkInteger } from "../src/options";

/** A shared consumer as server code sees it: the API's own, leases in this process. */
export interface VQueueSharedConsumer {
  readonly queue: string;
  readonly name: string;
  /** Leases up to `max` (default 10) messages, waiting up to `timeoutMs` (default 0: at once) for the first. */
  poll(options?: { max?: number; leaseMs?: number; timeoutMs?: number; signal?: AbortSignal }): Promise<LeasedMessage[]>;
  /** Acknowledges a leased message (durable when it resolves). */
  ack(ref: LeaseRef): Promise<void>;
  /** Gives it back: again after `delayMs`, or to the dead-letter queue (`deadLetter`, or after `maxDeliveries`). */
  nack(ref: LeaseRef, options?: NackOptions): Promise<void>;
  /** Keeps a lease `leaseMs` more from now; resolves with its new end. */
  extend(ref: LeaseRef, options?: { leaseMs?: number }): Promise<number>;
  /** Live stats (`SharedConsumer.stats`). */
  stats(): Promise<SharedStats>;
}

export interface VQueueWorkerOptions {
  /** Handlers running at once. @default 8 */
  concurrency?: number;
  /** Lease time of each message (extended while its handler runs). @default the consumer's `leaseMs` */
  leaseMs?: number;
  /** A failure at this delivery sends the message to the dead-letter queue. @default the consumer's `maxDeliveries` */
  maxDeliveries?: number;
  /** How long a failed message waits before it comes again, by its deliveries so far. @default none */
  backoff?: (deliveries: number) => number;
  /** Stops the worker (as `stop()`). */
  signal?: AbortSignal;
  /** A handler's failure (after its nack), or a failed lease, ack or nack. @default logged with console.error */
  onError?: (error: unknown, message?: LeasedMessage) => void;
}

export interface VQueueWorker {
  /** Resolves once the worker has stopped and its handlers are done. */
  readonly done: Promise<void>;
  /** Leases nothing more, lets running handlers finish (their messages acked or nacked), resolves when done. */
  stop(): Promise<void>;
  readonly stats: { running: number; succeeded: number; failed: number };
}

/** How long one lease call waits for messages before asking again. */
const POLL_MS = 30_000;
/** After a failed lease, before the next. */
const RETRY_MS = 1000;

export function sharedHandle(handler: Promise<QueueHandler>, queue: string, name: string): VQueueSharedConsumer {
  const slot = async (): Promise<SharedSlot> => (await handler).sharedConsumer(queue, name);
  const one = async <T>(settled: Promise<({ ok: true; value: T } | { ok: false; error: unknown })[]>): Promise<T> => {
    const [result] = await settled;
    if (!result!.ok) throw result!.error;
    return result!.value;
  };
  return {
    queue,
    name,
    async poll({ max = 10, leaseMs, timeoutMs = 0, signal } = {}) {
      return (await slot()).lease({ max, leaseMs, timeoutMs, signal });
    },
    ack: async (ref) => one((await slot()).ack([ref])),
    nack: async (ref, options = {}) => one((await slot()).nack([ref], options)),
    extend: async (ref, options = {}) => one((await slot()).extend([ref], options.leaseMs)),
    stats: async () => (await slot()).stats,
  };
}

/**
 * Runs `handle` on the messages of shared consumer `name`, up to `concurrency` at once: acked
 * when it resolves, nacked with its error when it throws (after `backoff`, to the dead-letter
 * queue at `maxDeliveries`); a lease is extended while its handler runs.
 */
export function runWorker(consumer: VQueueSharedConsumer, handle: (message: LeasedMessage) => unknown, options: VQueueWorkerOptions = {}): VQueueWorker {
  const { concurrency = 8, leaseMs, maxDeliveries, backoff, signal, onError = (error) => console.error(`[v-queue] worker ${consumer.queue}/${consumer.name}:`, error) } = options;
  checkInteger("concurrency", concurrency, 1, 100_000);
  if (maxDeliveries !== undefined) checkInteger("maxDeliveries", maxDeliveries, 1, 1_000_000);
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) stop.abort();
  const stats = { running: 0, succeeded: 0, failed: 0 };
  const running = new Set<Promise<void>>();
  const report = (error: unknown, message?: LeasedMessage) => {
    try {
      onError(error, message);
    } catch {
      // A throwing onError must not stop the worker.
    }
  };

  const one = async (message: LeasedMessage) => {
    // Extended at half its time, for as long as the handler runs.
    const every = Math.max(50, Math.floor((message.leaseUntil - Date.now()) / 2));
    const timer = setInterval(() => void consumer.extend(message, { leaseMs }).catch((error: unknown) => report(error, message)), every);
    try {
      await handle(message);
      clearInterval(timer);
      stats.succeeded++;
      await consumer.ack(message).catch((error: unknown) => report(error, message));
    } catch (error) {
      clearInterval(timer);
      stats.failed++;
      const why = error instanceof Error ? error.message : String(error);
      const deadLetter = maxDeliveries !== undefined && message.deliveries >= maxDeliveries;
      await consumer.nack(message, { error: why, delayMs: deadLetter ? 0 : Math.max(0, Math.round(backoff?.(message.deliveries) ?? 0)), deadLetter }).catch((nackError: unknown) => report(nackError, message));
      report(error, message);
    }
  };

  const loop = async () => {
    while (!stop.signal.aborted) {
      if (running.size >= concurrency) {
        await Promise.race(running);
        continue;
      }
      let batch: LeasedMessage[];
      try {
        batch = await consumer.poll({ max: concurrency - running.size, leaseMs, timeoutMs: POLL_MS, signal: stop.signal });
      } catch (error) {
        if (stop.signal.aborted) break;
        report(error);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, RETRY_MS);
          stop.signal.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
        });
        continue;
      }
      for (const message of batch) {
        stats.running++;
        const run: Promise<void> = one(message).finally(() => {
          stats.running--;
          running.delete(run);
        });
        running.add(run);
      }
    }
    await Promise.all(running);
    signal?.removeEventListener("abort", onAbort);
  };
  const done = loop();
  return {
    done,
    stop: () => {
      stop.abort();
      return done;
    },
    stats,
  };
}
