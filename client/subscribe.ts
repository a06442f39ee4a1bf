import { sleep } from "../src/core/sleep";
import { VQueueClientError, VQueueNetworkError } from "./errors";
import type { RetryOption } from "./retry";
import type { ConsumeOptions, ConsumeResult } from "./types";
import type { AnyClientMessage } from "./messages";
import { MessageIterator } from "./message-iterator";

export interface SubscribeOptions extends Pick<ConsumeOptions, "format" | "json"> {
  /** Stops the loop (the iterator then ends; nothing is thrown). */
  signal?: AbortSignal;
  /** Messages per long poll. @default 100 */
  maxMessages?: number;
  /** How long each long poll waits on the server. @default 25000 */
  pollTimeoutMs?: number;
  /**
   * When to commit: after each message the loop body finished, or once per batch.
   * Either way a message is committed only after the body finished with it (at-least-once):
   * a throw or `break` in the body commits nothing past the message in hand.
   * @default "batch"
   */
  commit?: "message" | "batch";
  /**
   * Reconnect delays after a network error, a server restart, or while the queue does not
   * exist yet: doubling from `min` to `max` ms. @default { min: 100, max: 5000 }
   */
  backoff?: { min?: number; max?: number };
  /** Told about each error that the loop recovers from by reconnecting. */
  onReconnect?: (error: unknown, delayMs: number) => void;
  /**
   * Told when retention deleted messages this consumer had not read yet (the server's
   * `missed`): the loop goes on at the oldest message left. Without it, a console.warn line.
   */
  onMissed?: (missed: number) => void;
}

const warnMissed = (missed: number) => console.warn(`[v-queue] ${missed} messages were deleted by retention before this consumer read them.`);

/** How long a finished batch waits for the next one before it is committed on its own. */
const QUIET_AFTER_MS = 50;

/** The client's calls the loop makes (the client itself in `client.subscribe`). */
export interface SubscribeCalls {
  consume(queue: string, consumer: string, options: ConsumeOptions): Promise<ConsumeResult<unknown> | ConsumeResult>;
  commit(queue: string, consumer: string, cursor?: string, options?: RetryOption): Promise<unknown>;
  rewind(queue: string, consumer: string, options?: { signal?: AbortSignal }): Promise<unknown>;
}

interface NextBatch {
  batch: Promise<AnyClientMessage[]>;
  settled: boolean;
  abort: AbortController;
}

/**
 * Long-polls in a loop and yields messages one by one. Starts (and restarts, after a
 * reconnect) from the consumer's committed position, and skips what this loop already
 * finished, so a server restart neither loses a message nor hands the loop one twice.
 * The next batch is requested while the loop body works on the current one.
 */
export function subscribe(
  client: SubscribeCalls,
  queue: string,
  consumer: string,
  options: SubscribeOptions = {},
): AsyncGenerator<AnyClientMessage, void, undefined> {
  const { signal, maxMessages = 100, pollTimeoutMs = 25_000, commit = "batch", format, json } = options;
  const minDelay = options.backoff?.min ?? 100;
  const maxDelay = options.backoff?.max ?? 5000;
  let delay = minDelay;
  let needRewind = true;
  // Per partition (-1 for a queue without partitions): a partition's messages are ordered among
  // themselves only. The last message the loop body finished, the last one the server confirmed
  // committed, and the last one it handed out since the last rewind (no commit may go past it).
  const done = new Map<number, AnyClientMessage>();
  const committed = new Map<number, AnyClientMessage>();
  const handedOut = new Map<number, AnyClientMessage>();
  /** The request for the next batch, sent before the loop body starts on the current one. */
  let next: NextBatch | undefined;

  /** What may be committed now: each partition's last finished message, if not committed yet and handed out since the last rewind. */
  const toCommit = (): AnyClientMessage[] => {
    const out: AnyClientMessage[] = [];
    for (const [key, message] of done) {
      const last = handedOut.get(key);
      if (message !== committed.get(key) && last && !isBefore(last, message)) out.push(message);
    }
    return out;
  };
  /** One cursor, or a partitioned queue's composite one ("p0:...,p3:..."). */
  const cursorOf = (messages: AnyClientMessage[]) => (messages.length === 0 ? undefined : messages.map((m) => m.cursor).join(","));
  const markCommitted = (messages: AnyClientMessage[]) => {
    for (const message of messages) {
      const before = committed.get(partitionOf(message));
      if (!before || isBefore(before, message)) committed.set(partitionOf(message), message);
    }
  };
  /** `retry: false` for the last, best-effort one: a loop that ends does not wait for a server that is away. */
  const commitDone = async (retry = true) => {
    const targets = toCommit();
    if (targets.length === 0) return;
    await client.commit(queue, consumer, cursorOf(targets), { retry });
    markCommitted(targets);
  };
  /** One long poll; what the body finished is committed in the same request, before the server waits. */
  const poll = (abort?: AbortController): Promise<AnyClientMessage[]> => {
    const targets = toCommit();
    const requestSignal = abort ? (signal ? AbortSignal.any([signal, abort.signal]) : abort.signal) : signal;
    return client
      .consume(queue, consumer, { maxMessages, timeoutMs: pollTimeoutMs, signal: requestSignal, format, json, commit: cursorOf(targets) })
      .then(({ messages, missed }) => {
        markCommitted(targets);
        if (missed > 0) (options.onMissed ?? warnMissed)(missed);
        for (const message of messages) handedOut.set(partitionOf(message), message);
        return messages;
      });
  };
  /** Drops the request for the next batch: what it handed out is handed out again after a rewind. */
  const dropNext = () => {
    if (!next) return;
    next.abort.abort();
    next.batch.catch(() => {});
    next = undefined;
  };

  /** Batches, each once the loop body finished the one before (MessageIterator hands out their messages). */
  async function* batches(): AsyncGenerator<AnyClientMessage[], void, undefined> {
    try {
      while (!signal?.aborted) {
        let batch: AnyClientMessage[];
        try {
          if (next) {
            const pending = next;
            next = undefined;
            batch = await pending.batch;
          } else {
            // After a (re)connect, hand out again everything after the committed position.
            if (needRewind) {
              handedOut.clear();
              // A consumer (or queue) that does not exist yet has nothing to hand out again.
              await client.rewind(queue, consumer, { signal }).catch((error: unknown) => {
                if (!(error instanceof VQueueClientError && error.code === "E_NOT_FOUND")) throw error;
              });
              needRewind = false;
            }
            batch = await poll();
            // What the body finished before a reconnect could not go with that request: saved now.
            await commitDone();
          }
          delay = minDelay;
        } catch (error) {
          if (signal?.aborted) return;
          if (!isRecoverable(error)) throw error;
          options.onReconnect?.(error, delay);
          await sleep(delay, signal);
          delay = Math.min(delay * 2, maxDelay);
          needRewind = true;
          continue;
        }
        if (batch.length > 0) {
          const abort = new AbortController();
          const pending: NextBatch = { batch: poll(abort), settled: false, abort };
          pending.batch.then(
            () => (pending.settled = true),
            () => (pending.settled = true),
          );
          next = pending;
        }
        // Already finished by this loop (handed out again after a reconnect): skipped.
        const fresh = done.size === 0 ? batch : batch.filter((message) => isAfter(message, done.get(partitionOf(message))));
        if (fresh.length > 0) yield fresh;
        if (signal?.aborted) return;
        // The batch is finished. When the next one comes soon, its successor's request commits
        // this one; on a quiet queue (the next request is parked on the server), commit it now.
        if (next && !next.settled) {
          await settledWithin(next.batch, QUIET_AFTER_MS);
          if (!next.settled) await commitDone().catch(() => (needRewind = true));
        }
        if (needRewind) dropNext();
      }
    } finally {
      // Best effort: save what the body finished (before dropping the next request, whose
      // cancellation makes the server hand its batch out again). If it fails, those come again.
      await commitDone(false).catch(() => {});
      dropNext();
    }
  }

  /** The loop body is done with `message`: with `commit: "message"`, saved before the next one. */
  const finished = (message: AnyClientMessage): Promise<void> | undefined => {
    done.set(partitionOf(message), message);
    if (commit === "message") return commitDone().catch(() => void (needRewind = true));
    return undefined;
  };
  return new MessageIterator(batches(), finished, () => !!signal?.aborted);
}

/**
 * Network errors, a server shutting down or restarting, a consumer still held by a dying
 * process, and a queue that does not exist yet (a subscriber may start before its producers).
 */
function isRecoverable(error: unknown): boolean {
  if (error instanceof VQueueNetworkError) return true;
  if (error instanceof VQueueClientError) {
    // E_CURSOR: a restarted server has not handed out what we commit; rewind and go on.
    return [502, 503, 504].includes(error.status) || ["E_SHUTDOWN", "E_LOCKED", "E_CURSOR", "E_CLOSED", "E_NOT_FOUND"].includes(error.code);
  }
  return false;
}

/** Whether `a` comes strictly before `b` in their partition (both of one). */
function isBefore(a: AnyClientMessage, b: AnyClientMessage): boolean {
  return a.part < b.part || (a.part === b.part && a.offset < b.offset);
}

/** Whether `message` comes after `than` (none: yes). */
const isAfter = (message: AnyClientMessage, than: AnyClientMessage | undefined): boolean => !than || isBefore(than, message);

/** The key of a message's partition: -1 for a queue without partitions. */
const partitionOf = (message: AnyClientMessage): number => message.partition ?? -1;

/** Resolves when `promise` settles or after `ms`, whichever comes first (no timer left behind). */
function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    promise.then(done, done);
  });
}
