/**
 * Shared consumers in a Nitro app's server code, without HTTP: `useVQueue().shared(...)` and
 * `useVQueue().worker(...)` reach the one SharedConsumer the API uses (the server's registry
 * holds its lock), through its slot, asked for again at each call (an idle slot may be closed).
 */
import type { QueueHandler } from "../runtime/index";
import type { LeasingSlot, Settled, SlotStats } from "../runtime/shared-slot";
import type { LeasedMessage, LeaseRef, NackOptions } from "../src/consumers/types";
import { parseAnyLeaseToken } from "../protocol/binary";
import { VQueueError } from "../src/core/errors";
import { errorAnswer } from "../runtime/errors";
import { VQueueClientError } from "../client/errors";
import { fromLeaseRecord, type LeasedClientMessage } from "../client/shared";
import { runWorker, type Worker, type WorkerCalls, type WorkerHandlerContext, type WorkerOptions } from "../client/worker";

/** A shared consumer as server code sees it: the API's own, leases in this process. */
export interface VQueueSharedConsumer {
  readonly queue: string;
  readonly name: string;
  /** Leases up to `max` (a partitioned queue's messages carry their `partition`) (default 10) messages (bodies up to `maxBytes`, at least one; default no limit), waiting up to `timeoutMs` (default 0: at once) for the first. */
  poll(options?: { max?: number; maxBytes?: number; leaseMs?: number; timeoutMs?: number; signal?: AbortSignal }): Promise<LeasedMessage[]>;
  /** Acknowledges a leased message (durable when it resolves); `result` (a JSON value, at most 64 KiB as JSON): its `completed` outcome's. */
  ack(ref: LeaseRef, options?: { result?: unknown }): Promise<void>;
  /** A progress update of a leased message (a JSON value, at most 64 KiB as JSON; durable when it resolves); `E_LEASE` unless it is leased now. */
  progress(ref: LeaseRef, progress: unknown): Promise<void>;
  /** Gives it back: again after `delayMs`, or to the dead-letter queue (`deadLetter`, or after `maxDeliveries`). */
  nack(ref: LeaseRef, options?: NackOptions): Promise<void>;
  /** Keeps a lease `leaseMs` more from now; resolves with its new end. */
  extend(ref: LeaseRef, options?: { leaseMs?: number }): Promise<number>;
  /** No leases to anyone for `ms` (docs/work-queues.md, "Rate limits and back-off"); resolves with its end. */
  backOff(ms: number): Promise<number>;
  /** Live stats (`SharedConsumer.stats`; of a partitioned queue, summed over the partitions this instance holds, without `ackFloor`). */
  stats(): Promise<SlotStats>;
}

/** `handler` is asked at each call: the instance may open its queues at first use (a Worker's `durable-object:` storage). */
export function sharedHandle(handler: () => Promise<QueueHandler>, queue: string, name: string): VQueueSharedConsumer {
  const slot = async (): Promise<LeasingSlot> => (await handler()).sharedConsumer(queue, name);
  // One ref through the slot's batch calls: its outcome, or its error thrown.
  const one = async <T>(settled: Promise<Settled<T>[]>): Promise<T> => {
    const [result] = await settled;
    if (!result!.ok) throw result!.error;
    return result!.value;
  };
  return {
    queue,
    name,
    poll: ({ max = 10, maxBytes = Infinity, leaseMs, timeoutMs = 0, signal } = {}) =>
      withHttpStatus(slot().then((opened) => opened.lease({ max, maxBytes, leaseMs, timeoutMs, signal }))),
    ack: (ref, options = {}) => withHttpStatus(slot().then((opened) => one(opened.ack([ref], options.result === undefined ? undefined : [options.result])))),
    progress: (ref, progress) => withHttpStatus(slot().then((opened) => opened.progress(ref, progress))),
    nack: (ref, options = {}) => withHttpStatus(slot().then((opened) => one(opened.nack([ref], options)))),
    extend: (ref, options = {}) => withHttpStatus(slot().then((opened) => one(opened.extend([ref], options.leaseMs)))),
    backOff: (ms) => withHttpStatus(slot().then((opened) => opened.backOff(ms))),
    stats: async () => (await slot()).readStats(),
  };
}

/**
 * The client's worker (client/worker.ts: lease ahead, batched acks, extends, backoff, dead
 * letters, clean stop) on calls to the engine in this process instead of HTTP requests: the
 * handler gets the same messages as a remote worker's (lease tokens as strings).
 */
export function engineWorker<T>(
  handler: () => Promise<QueueHandler>,
  queue: string,
  name: string,
  handle: (message: LeasedClientMessage<T>, ctx: WorkerHandlerContext) => unknown,
  options: WorkerOptions = {},
): Worker {
  const slot = async (): Promise<LeasingSlot> => (await handler()).sharedConsumer(queue, name);
  // The tokens are the worker's own, made by fromLeaseRecord (with the partition on a partitioned queue).
  const refs = (leases: string[]) =>
    leases.map((token) => {
      const ref = parseAnyLeaseToken(token);
      if (!ref) throw new TypeError(`Invalid lease token ${JSON.stringify(token)}.`);
      return ref;
    });
  const errorsOf = <V>(leases: string[], settled: Settled<V>[]) =>
    settled.flatMap((outcome, i) =>
      outcome.ok ? [] : [{ lease: leases[i]!, message: outcome.error instanceof Error ? outcome.error.message : String(outcome.error) }],
    );
  const calls: WorkerCalls = {
    async leaseBatch({ max, leaseMs, timeoutMs, signal, json }) {
      // In process: no response to keep small.
      // Opening the slot fails too (no such queue yet): both alike.
      const messages = await slot()
        .then((opened) => opened.lease({ max, maxBytes: Infinity, leaseMs, timeoutMs, signal }))
        .catch((error: unknown) => {
          // Closed under the call (idle, purge): the next call opens it again.
          if (VQueueError.isError(error) && error.code === "E_CLOSED") return [];
          // No such queue yet: the worker tells onError and waits for it (backing off), as a remote worker does on a 404.
          if (VQueueError.isError(error) && error.code === "E_NOT_FOUND") throw new VQueueClientError(404, "E_NOT_FOUND", error.message, { cause: error });
          throw error;
        });
      const now = Date.now();
      return { messages: messages.map((m) => fromLeaseRecord(m, json)), leaseMs: messages.length > 0 ? messages[0]!.leaseUntil - now : 0 };
    },
    ack: async (leases, results) => ({
      errors: errorsOf(leases, await (await slot()).ack(refs(leases), results && leases.map((lease) => results[lease]))),
    }),
    progress: async (lease, progress) => (await slot()).progress(refs([lease])[0]!, progress),
    nack: async (leases, { delayMs, defaultDelayMs, error, deadLetter, release }) => ({
      errors: errorsOf(leases, await (await slot()).nack(refs(leases), { delayMs, defaultDelayMs, error, deadLetter, release })),
    }),
    backOff: async (delayMs) => (await slot()).backOff(delayMs),
    async extend(leases, leaseMs) {
      const settled = await (await slot()).extend(refs(leases), leaseMs);
      return { extended: leases.filter((_, i) => settled[i]!.ok).map((lease) => ({ lease })) };
    },
  };
  return runWorker(calls, handle, options, { queue, consumer: name });
}

/**
 * Gives what `promise` rejects with the HTTP status the API answers for it (`status`,
 * `statusCode`, `headers` such as Retry-After, and `data`): a host's error handler (h3's, in a
 * route calling `useVQueue()`) answers that status instead of a 500.
 */
export async function withHttpStatus<T>(promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (error) {
    const { status, code, message, headers } = errorAnswer(error);
    if (error instanceof Error && code !== "E_INTERNAL") Object.assign(error, { status, statusCode: status, headers, data: { error: { code, message } } });
    throw error;
  }
}
