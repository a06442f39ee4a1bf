import { VQueueClientError, VQueueNetworkError } from "./errors";
import type { ConsumeOptions, VQueueClient } from "./index";
import type { ClientMessage } from "./messages";

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
}

/**
 * Long-polls in a loop and yields messages one by one. Starts (and restarts, after a
 * reconnect) from the consumer's committed position, and skips what this loop already
 * finished, so a server restart neither loses a message nor hands the loop one twice.
 */
export async function* subscribe<T>(
  client: VQueueClient,
  queue: string,
  consumer: string,
  options: SubscribeOptions = {},
): AsyncGenerator<ClientMessage<T>, void, undefined> {
  const { signal, maxMessages = 100, pollTimeoutMs = 25_000, commit = "batch", format, json } = options;
  const minDelay = options.backoff?.min ?? 100;
  const maxDelay = options.backoff?.max ?? 5000;
  let delay = minDelay;
  let needRewind = true;
  /** The last message the loop body finished, and whether it is committed. */
  let done: ClientMessage<T> | undefined;
  let uncommitted = false;
  /** The last message the server handed out since the last rewind: a commit may not go past it. */
  let handedOut: ClientMessage<T> | undefined;

  const canCommit = () => !!done && uncommitted && !!handedOut && !isBefore(handedOut, done);
  const commitDone = async () => {
    if (!canCommit()) return;
    await client.commit(queue, consumer, done!.cursor);
    uncommitted = false;
  };

  try {
    while (!signal?.aborted) {
      let batch: ClientMessage<T>[];
      try {
        // After a (re)connect, hand out again everything after the committed position.
        if (needRewind) {
          handedOut = undefined;
          // A consumer (or queue) that does not exist yet has nothing to hand out again.
          await client.rewind(queue, consumer, { signal }).catch((error: unknown) => {
            if (!(error instanceof VQueueClientError && error.code === "E_NOT_FOUND")) throw error;
          });
          needRewind = false;
        }
        // What the body finished is committed in the same request, before the server waits.
        const piggyback = canCommit() ? done!.cursor : undefined;
        ({ messages: batch } = await client.consume<T>(queue, consumer, { maxMessages, timeoutMs: pollTimeoutMs, signal, format, json, commit: piggyback }));
        if (piggyback) uncommitted = false;
        handedOut = batch.at(-1) ?? handedOut;
        // What the body finished before (the last batch, or before a reconnect) is saved now.
        await commitDone();
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
      for (const message of batch) {
        // Already finished by this loop (handed out again after a reconnect): skip it.
        if (done && !isBefore(done, message)) continue;
        yield message;
        done = message;
        uncommitted = true;
        if (commit === "message") await commitDone().catch(() => (needRewind = true));
        if (signal?.aborted) return;
      }
      // The batch is finished: it is committed by the next poll's request, sent right away.
    }
  } finally {
    // Best effort: save what the body finished. If it fails, those messages come again.
    await commitDone().catch(() => {});
  }
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

/** Whether `a` comes strictly before `b` in the queue. */
function isBefore(a: ClientMessage<unknown>, b: ClientMessage<unknown>): boolean {
  return a.part < b.part || (a.part === b.part && a.offset < b.offset);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
