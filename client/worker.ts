// Over 300 lines: one worker loop (lease, run handlers concurrently, ack, nack with backoff, extend
// long handlers, retry the network) whose parts share its state; split, each would need all of it.
import { sleep } from "../src/core/sleep";
import { RateLimitError, VQueueClientError, isAbortError } from "./errors";
import { RETRY_DELAY_MS, RETRY_TIMEOUT_MS, isTransient, retryDelay, withRetries } from "./retry";
import type { AnyLeasedMessage, LeaseBatch, LeasedClientMessage, NackClientOptions } from "./shared";
import { checkWorkerOptions, outcomeValueError, type WorkerOptions } from "./worker-options";
import { workerLine, type WorkerEvent, type WorkerName } from "./worker-log";

export type { WorkerOptions };

export interface WorkerStats {
  /** Handlers that finished (their messages acked or being acked). */
  processed: number;
  /** Handlers that threw (their messages nacked). */
  failed: number;
  /** Messages this worker sent to the dead-letter queue. */
  deadLettered: number;
  /** Handlers running now. */
  running: number;
  /** Leased and waiting for a handler. */
  waiting: number;
}

/** What a handler is given beside its message. */
export interface WorkerHandlerContext {
  /**
   * The whole consumer hands nothing out to any worker for `delayMs` (BullMQ's `rateLimit`: an
   * API answered 429, say); this worker starts no handler until then and gives back what waits
   * for one. The message in hand is acked if the handler returns, given back uncounted if it
   * throws a `RateLimitError`.
   */
  rateLimit(delayMs: number): void;
  /**
   * A progress update of this message (any JSON value, at most 64 KiB as JSON): a `progress`
   * outcome event (`events()`). Resolves once the server has it; rejects when it is refused
   * (not JSON, too large, the lease lost). Sent in order, and before the message's ack.
   */
  progress(value: unknown): Promise<void>;
}

export interface Worker {
  /** Resolves once the worker stopped (after `stop()` or the signal); rejects on an error it cannot recover from (E_KIND, 403, ...). */
  done: Promise<void>;
  /** Stops leasing, lets running handlers finish (and acks them), gives back what waits; resolves when all is sent. */
  stop(): Promise<void>;
  /** Backs the whole consumer off for `delayMs` (see `WorkerHandlerContext.rateLimit`). */
  rateLimit(delayMs: number): void;
  readonly stats: WorkerStats;
}

export interface WorkerCalls {
  leaseBatch(opts: { max: number; leaseMs?: number; timeoutMs: number; signal: AbortSignal; json: boolean }): Promise<LeaseBatch>;
  /** `results`: by lease token, those whose handler returned a value. */
  ack(leases: string[], results?: Record<string, unknown>): Promise<{ errors: { lease: string; message: string }[] }>;
  progress(lease: string, progress: unknown): Promise<unknown>;
  nack(leases: string[], opts: NackClientOptions): Promise<unknown>;
  extend(leases: string[], leaseMs: number): Promise<{ extended: { lease: string }[] }>;
  backOff(delayMs: number): Promise<unknown>;
}

/** Who the worker is (for its lines) and how long its acks, nacks and extends are retried: the client's. */
export interface WorkerContext extends WorkerName {
  /** @default 20000 */
  retryTimeoutMs?: number;
  /** @default 200 */
  retryDelayMs?: number;
}

interface Held {
  message: AnyLeasedMessage;
  /** Local time the lease runs out: the server's remaining time when it answered, from the answer's arrival, less a margin. */
  expires: number;
  leaseMs: number;
  /** The server refused to extend it (it ran out, or went to another): not asked again. */
  lost?: boolean;
  /** An extend of it is on its way: not asked again before the answer. */
  extending?: boolean;
  /** Its handler's progress updates on their way, in order: its ack goes after them. */
  progressing?: Promise<unknown>;
}

const defaultBackoff = (deliveries: number) => Math.min(100 * 2 ** Math.max(0, deliveries - 1), 30_000);
const MAX_BATCH = 1000;
/** The longest wait between failed lease requests (the queue not existing yet, the server away), a longer Retry-After included. */
const LEASE_RETRY_MAX_MS = 5000;
/** Taken off a lease's time for the answer's way back (the server counted from its answer). */
const LEASE_MARGIN_MS = 200;

/**
 * Runs `handler` on a shared consumer's messages, `concurrency` at once: leases ahead (so a
 * handler never waits for a round trip), acks on success (many acks per request), nacks on a
 * throw, extends the leases of handlers still running at half their time, retries what the
 * network fails. A worker that dies loses nothing: its leases run out and the messages go to others.
 */
export function runWorker<T>(
  calls: WorkerCalls,
  handler: (message: LeasedClientMessage<T>, ctx: WorkerHandlerContext) => unknown,
  options: WorkerOptions = {},
  context: WorkerContext = {},
): Worker {
  checkWorkerOptions(options);
  const { concurrency = 8, leaseMs, maxDeliveries, backoff = defaultBackoff, json = false, pollTimeoutMs = 20_000, ackDelayMs = 2 } = options;
  let batch = options.batch ?? Math.min(MAX_BATCH, concurrency * 4);
  /** A handler slot sat idle with nothing leased while a full batch was on its way: lease more at once. */
  let starved = false;
  const { retryTimeoutMs = RETRY_TIMEOUT_MS, retryDelayMs = RETRY_DELAY_MS } = context;
  /** Tells the caller's onError, or prints the event's line. */
  const report = (event: WorkerEvent) => {
    if (!options.onError) {
      const line = workerLine(event, context);
      if (line !== undefined) console.warn(line);
      return;
    }
    if (event.kind === "recovered") return;
    // A throw in the caller's onError must not stop the worker.
    try {
      options.onError(event.error, "message" in event ? event.message : undefined);
    } catch {
      // ignored: it was told
    }
  };
  const onError = (error: unknown, message?: AnyLeasedMessage) => report({ kind: "lost", error, message });
  const stats: WorkerStats = { processed: 0, failed: 0, deadLettered: 0, running: 0, waiting: 0 };
  const waiting: Held[] = [];
  const running = new Set<Held>();
  const sending = new Set<Promise<unknown>>();
  let acks: AnyLeasedMessage[] = [];
  /** The results of the acks waiting, by lease token (handlers that returned a value). */
  let results: Record<string, unknown> | undefined;
  let ackTimer: ReturnType<typeof setTimeout> | undefined;
  let stopping = false;
  /** The lease requests in flight: one controller each, since the client links it to its timeout (AbortSignal.any keeps every signal linked to a long-lived one, nodejs/node#55351). */
  const leaseAborts = new Set<AbortController>();
  /** Messages asked for by the lease requests in flight. */
  let requested = 0;
  /** The last lease answer was a full batch: more wait on the server. */
  let backlog = false;
  let wakes: (() => void)[] = [];
  const wakeLeaser = () => {
    const list = wakes;
    wakes = [];
    for (const w of list) w();
  };
  /**
   * Whether a lease request may go now: the first once fewer than half a batch wait; a second
   * while one is on its way only once nothing waits and the server has more (the handlers are
   * faster than round trips: the two overlap, and neither side idles while the other works).
   */
  const mayLease = () => (requested === 0 ? waiting.length <= batch / 2 : backlog && requested <= batch && waiting.length === 0);

  /** Acks being retried (the server is away): leasing waits for them, so that finished work is not handed out again. */
  const retryingAcks = new Set<Promise<unknown>>();
  /** Sends in the background, retrying what may succeed next time (`isTransient`) for `retryTimeoutMs`; the worker's stop waits for it. */
  const send = (what: "ack" | "nack" | "extend" | "back-off", call: () => Promise<unknown>): Promise<unknown> => {
    const p: Promise<unknown> = withRetries(call, {
      timeoutMs: retryTimeoutMs,
      delayMs: retryDelayMs,
      onRetry: () => void (what === "ack" && retryingAcks.add(p)),
    }).catch((error: unknown) => onError(new Error(`${what} failed: ${(error as Error)?.message ?? String(error)}`, { cause: error })));
    sending.add(p);
    void p.finally(() => (sending.delete(p), retryingAcks.delete(p)));
    return p;
  };

  const flushAcks = () => {
    clearTimeout(ackTimer);
    ackTimer = undefined;
    if (acks.length === 0) return;
    const list = acks;
    const sentResults = results;
    acks = [];
    results = undefined;
    send("ack", async () => {
      const { errors } = await calls.ack(
        list.map((m) => m.lease),
        sentResults,
      );
      for (const e of errors) onError(new Error(`ack of ${e.lease} refused: ${e.message}`));
      if (options.onAck) {
        const refused = new Set(errors.map((e) => e.lease));
        options.onAck(refused.size === 0 ? list : list.filter((m) => !refused.has(m.lease)));
      }
    });
  };

  const ack = (message: AnyLeasedMessage, result: unknown) => {
    acks.push(message);
    if (result !== undefined) (results ??= {})[message.lease] = result;
    if (acks.length >= batch) flushAcks();
    else ackTimer ??= setTimeout(flushAcks, ackDelayMs);
  };

  /** The caller's backoff for a failed message; one that throws or says no number of ms is told, and the default used (the message still comes again). */
  const delayAfter = (message: AnyLeasedMessage): number => {
    let ms: unknown;
    try {
      ms = backoff(message.deliveries);
    } catch (error) {
      ms = error;
    }
    if (typeof ms === "number" && Number.isFinite(ms) && ms >= 0) return Math.round(ms);
    onError(
      new Error(
        `backoff(${message.deliveries}) gave ${ms instanceof Error ? `a throw: ${ms.message}` : String(ms)}, not a number of ms from 0 up: ${defaultBackoff(message.deliveries)} ms instead`,
      ),
      message,
    );
    return defaultBackoff(message.deliveries);
  };

  /** Until then (local clock) the consumer backs off: no handler starts, no lease is asked for. */
  let pausedUntil = 0;
  let resumeTimer: ReturnType<typeof setTimeout> | undefined;
  /** Backs the consumer off; `giveBack` (leases) go back uncounted once the back-off is on the server, so that nobody takes them before. */
  const rateLimit = (delayMs: number, giveBack: string[] = []) => {
    if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new TypeError(`Invalid rateLimit delayMs ${String(delayMs)}: use an integer from 0 up (ms).`);
    const until = Date.now() + delayMs;
    // One running that ends later covers it (the server keeps the later end too).
    if (until <= pausedUntil || stopping) {
      if (giveBack.length > 0) send("nack", () => calls.nack(giveBack, { delayMs: 0, release: true }));
      return;
    }
    pausedUntil = until;
    const backedOff = send("back-off", () => calls.backOff(delayMs));
    // What waits here would meet the same limit: to others, once the back-off ends.
    const unstarted = [...giveBack, ...waiting.splice(0).map((h) => h.message.lease)];
    stats.waiting = 0;
    if (unstarted.length > 0)
      send("nack", async () => {
        await backedOff;
        return calls.nack(unstarted, { delayMs: 0, release: true });
      });
    clearTimeout(resumeTimer);
    resumeTimer = setTimeout(pump, delayMs);
  };

  /** Sends a handler's progress update after its earlier ones; the rejection is the caller's to see (and marked handled: an update not awaited fails quietly). */
  const progress = (held: Held, value: unknown): Promise<void> => {
    const problem = outcomeValueError(value, "A progress value");
    if (problem) return Promise.reject(problem);
    const sent = (held.progressing ?? Promise.resolve())
      .catch(() => {})
      .then(() => withRetries(() => calls.progress(held.message.lease, value), { timeoutMs: retryTimeoutMs, delayMs: retryDelayMs }))
      .then(() => {});
    const tracked = sent.catch(() => {});
    held.progressing = tracked;
    sending.add(tracked);
    void tracked.finally(() => sending.delete(tracked));
    return sent;
  };
  const contextOf = (held: Held): WorkerHandlerContext => ({ rateLimit: (delayMs) => rateLimit(delayMs), progress: (value) => progress(held, value) });

  /**
   * A handler ended: ack (with what it returned, a JSON value), or nack with its error (to the
   * dead-letter queue at maxDeliveries); a `RateLimitError` backs off and gives it back uncounted.
   */
  const settle = (held: Held, failed: boolean, error?: unknown, result?: unknown) => {
    const { message } = held;
    if (!failed && result !== undefined) {
      const problem = outcomeValueError(result, "The handler's return value");
      if (problem) return settle(held, true, problem);
    }
    running.delete(held);
    stats.running = running.size;
    if (failed && RateLimitError.isRateLimit(error)) {
      rateLimit(error.delayMs, [message.lease]);
    } else if (!failed) {
      stats.processed++;
      // After its progress updates: the ack ends the lease they need.
      if (held.progressing) void held.progressing.then(() => ack(message, result));
      else ack(message, result);
    } else {
      stats.failed++;
      const deadLetter = maxDeliveries !== undefined && message.deliveries >= maxDeliveries;
      report({ kind: "failed", error, message, maxDeliveries, deadLetter });
      if (deadLetter) stats.deadLettered++;
      const text = error instanceof Error ? error.message : String(error);
      // The caller's backoff decides; without one, the message's or the consumer's does (server side), else the default here.
      const retry = () => (options.backoff ? { delayMs: delayAfter(message) } : { defaultDelayMs: delayAfter(message) });
      send("nack", () => calls.nack([message.lease], deadLetter ? { error: text, deadLetter: true } : { error: text, ...retry() }));
    }
    pump();
  };

  // Not an async function: a handler that returns at once costs no promise nor microtask.
  const run = (held: Held) => {
    running.add(held);
    stats.running = running.size;
    let result: unknown;
    try {
      result = handler(held.message as unknown as LeasedClientMessage<T>, contextOf(held));
    } catch (error) {
      return settle(held, true, error);
    }
    if (typeof (result as PromiseLike<unknown> | undefined)?.then === "function") {
      (result as PromiseLike<unknown>).then(
        (value) => settle(held, false, undefined, value),
        (error: unknown) => settle(held, true, error),
      );
    } else settle(held, false, undefined, result);
  };

  let pumping = false;
  /** Starts waiting messages while there is room; a lease that ran out while waiting is left (it goes to another). */
  const pump = () => {
    // A handler that ended at once calls back in here: the loop below goes on instead (no recursion).
    if (pumping) return;
    pumping = true;
    try {
      while (running.size < concurrency && waiting.length > 0 && !stopping && Date.now() >= pausedUntil) {
        const held = waiting.shift()!;
        if (held.expires <= Date.now()) continue;
        run(held);
      }
    } finally {
      pumping = false;
    }
    stats.waiting = waiting.length;
    // Nothing runs nor waits: no ack is coming soon, send those waiting now (they free the server's in-flight room).
    if (waiting.length === 0 && running.size === 0) flushAcks();
    if (waiting.length === 0 && running.size < concurrency) starved = true;
    if (mayLease()) wakeLeaser();
  };

  /**
   * Extends the leases past half their time: of running handlers, and of messages waiting for one.
   * Checked every 250 ms, more often for short leases (an eighth of the shortest held): a fixed
   * tick left a 400 ms lease under 150 ms for its extend to land.
   */
  const extendDue = () => {
    const now = Date.now();
    const due = [...running, ...waiting].filter((h) => !h.lost && !h.extending && h.expires - now < h.leaseMs / 2);
    if (due.length === 0) return;
    // Grouped by lease time: one request per group.
    for (const ms of new Set(due.map((h) => h.leaseMs))) {
      const group = due.filter((h) => h.leaseMs === ms);
      const sentAt = Date.now();
      for (const h of group) h.extending = true;
      send("extend", async () => {
        try {
          const { extended } = await calls.extend(
            group.map((h) => h.message.lease),
            ms,
          );
          const ok = new Set(extended.map((e) => e.lease));
          for (const h of group) {
            if (ok.has(h.message.lease)) h.expires = sentAt + ms;
            else if (!h.lost) {
              h.lost = true;
              onError(new Error(`extend of ${h.message.lease} refused: its lease ran out or it went to another worker`), h.message);
            }
          }
        } finally {
          for (const h of group) h.extending = false;
        }
      });
    }
  };
  const extendTick = () => {
    extendDue();
    extendTicker = setTimeout(extendTick, Math.max(20, Math.min(250, ...[...running, ...waiting].map((h) => h.leaseMs / 8))));
  };
  let extendTicker = setTimeout(extendTick, 250);

  /** Failed lease requests in a row (their backoff). */
  let failures = 0;
  /** The server went away (told once): told again when it answers. */
  let away = false;
  const leaseLoop = async () => {
    while (!stopping) {
      if (retryingAcks.size > 0) {
        await Promise.all(retryingAcks);
        continue;
      }
      if (!mayLease()) {
        await new Promise<void>((resolve) => wakes.push(resolve));
        continue;
      }
      // Backing off: the server would hold the request until then anyway.
      const pausedFor = pausedUntil - Date.now();
      if (pausedFor > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, pausedFor);
          wakes.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        continue;
      }
      let got: LeaseBatch;
      const leaseAbort = new AbortController();
      const max = batch;
      leaseAborts.add(leaseAbort);
      requested += max;
      try {
        got = await calls.leaseBatch({ max, leaseMs, timeoutMs: pollTimeoutMs, signal: leaseAbort.signal, json });
        if (away) report({ kind: "recovered" });
        failures = 0;
        away = false;
      } catch (error) {
        if (stopping && (isAbortError(error) || leaseAbort.signal.aborted)) break;
        const absent = error instanceof VQueueClientError && error.code === "E_NOT_FOUND";
        if (!isTransient(error) && !absent) throw error;
        // Told each time to an onError; printed once per outage.
        if (absent) report({ kind: "waiting", error });
        else if (!away || options.onError) report({ kind: "retrying", error });
        away ||= !absent;
        await sleep(Math.min(retryDelay(error, failures++, 100), LEASE_RETRY_MAX_MS), leaseAbort.signal);
        continue;
      } finally {
        requested -= max;
        leaseAborts.delete(leaseAbort);
      }
      if (options.batch === undefined && starved && got.messages.length === max && max === batch) batch = Math.min(MAX_BATCH, batch * 2);
      starved = false;
      backlog = got.messages.length === max;
      // From the answer's arrival, not the request's: a long poll may have waited longer than a lease.
      const expires = Date.now() + got.leaseMs - Math.min(LEASE_MARGIN_MS, got.leaseMs / 10);
      for (const message of got.messages) waiting.push({ message, expires, leaseMs: got.leaseMs });
      if (stopping) break;
      pump();
    }
  };

  let stopped: Promise<void> | undefined;
  let finish!: (error?: unknown) => void;
  const done = new Promise<void>((resolve, reject) => (finish = (error) => (error === undefined ? resolve() : reject(error))));
  // Two loops: the second leases only while the first's request is on its way (`mayLease`).
  // Both end before `stop` gives back what waits; the first failure is the worker's.
  const loops = [leaseLoop(), leaseLoop()];
  const loop = Promise.allSettled(loops).then((outcomes) => {
    for (const outcome of outcomes) if (outcome.status === "rejected") throw outcome.reason;
  });

  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      stopping = true;
      for (const abort of leaseAborts) abort.abort();
      wakeLeaser();
      let failure: unknown;
      await loop.catch((error: unknown) => (failure = error));
      // Running handlers finish and are acked; what waits goes back at once.
      while (running.size > 0) await sleep(5);
      const unstarted = waiting.splice(0).map((h) => h.message.lease);
      stats.waiting = 0;
      if (unstarted.length > 0) send("nack", () => calls.nack(unstarted, { delayMs: 0, release: true }));
      flushAcks();
      clearTimeout(extendTicker);
      clearTimeout(resumeTimer);
      // An ack that waited for its message's progress updates is sent once they are.
      while (sending.size > 0) {
        await Promise.all([...sending]);
        flushAcks();
      }
      finish(failure);
    })();
    return stopped;
  };
  // A fatal error stops the worker too (done rejects with it).
  for (const each of loops) each.catch(() => void stop());
  if (options.signal) {
    if (options.signal.aborted) void stop();
    else options.signal.addEventListener("abort", () => void stop(), { once: true });
  }
  done.catch(() => {});
  return { done, stop, rateLimit: (delayMs: number) => rateLimit(delayMs), stats };
}
