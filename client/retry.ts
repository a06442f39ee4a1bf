import { VQueueClientError, VQueueNetworkError } from "./errors";
import { sleep } from "../src/core/sleep";

/** How long the calls that are safe to repeat keep retrying by default: past a server's restart (kill, start, recovery). */
export const RETRY_TIMEOUT_MS = 20_000;
/** The first delay between attempts by default; it doubles up to `MAX_RETRY_DELAY_MS`. */
export const RETRY_DELAY_MS = 200;
const MAX_RETRY_DELAY_MS = 2000;

/** On a call that retries (see `ClientOptions.retryTimeoutMs`). */
export interface RetryOption {
  /** `false`: one request, no retry (a best-effort call that must not wait for a server that is away). @default true */
  retry?: boolean;
}

export interface RetryPolicy {
  /** Attempts stop once this long has passed since the first (and a wait would end past it). */
  timeoutMs: number;
  /** The first delay; doubled each attempt up to 2 s, each drawn between half of it and all of it. */
  delayMs: number;
  /** Retries at most (besides the time): none by default. */
  maxRetries?: number;
  signal?: AbortSignal;
  /** Told before each wait. */
  onRetry?: (error: unknown, delayMs: number) => void;
}

/** Refuses retry options that would retry without end or spin (NaN, negative), naming the option and what it takes. */
export function checkRetryOptions(options: { retry?: number; retryDelay?: number; retryTimeoutMs?: number; produceRetry?: number }): void {
  const checks: [keyof typeof options, (v: number) => boolean, string][] = [
    ["retry", (v) => Number.isSafeInteger(v) && v >= 0, "an integer from 0 up"],
    ["produceRetry", (v) => Number.isSafeInteger(v) && v >= 0, "an integer from 0 up"],
    ["retryDelay", (v) => Number.isFinite(v) && v > 0, "a number of ms above 0"],
    ["retryTimeoutMs", (v) => v >= 0, "a number of ms from 0 up (Infinity: no end)"],
  ];
  for (const [name, test, allowed] of checks) {
    const value = options[name];
    if (value !== undefined && (typeof value !== "number" || !test(value)))
      throw new TypeError(`Invalid client option ${name}: ${typeof value === "string" ? JSON.stringify(value) : String(value)}; it takes ${allowed}.`);
  }
}

/**
 * An error after which the same request may succeed: no answer (the server is down, restarting,
 * or the answer was lost), too many requests (429), another process's lock on the queue (409
 * `E_LOCKED`: a dying one), and the server's faults and unavailability (5xx: `E_BUSY`,
 * `E_SHUTDOWN`, `E_FENCED`, `E_IO`...) but not 501, 505, a full disk (507) nor a damaged file
 * (`E_CORRUPT`), which the next attempt meets again.
 */
export function isTransient(error: unknown): boolean {
  if (error instanceof VQueueNetworkError) return true;
  if (!(error instanceof VQueueClientError)) return false;
  if (error.status === 429 || error.code === "E_LOCKED") return true;
  return error.status >= 500 && ![501, 505, 507].includes(error.status) && error.code !== "E_CORRUPT";
}

/** The longest `Retry-After` a retry waits for. */
export const MAX_RETRY_AFTER_MS = 60_000;

/** The wait before retry number `retry` (0 first): backoff with jitter (so that many clients do not come back at once), or the server's `Retry-After` when it gave one. */
export function retryDelay(error: unknown, retry: number, delayMs: number): number {
  const backoff = Math.min(delayMs * 2 ** retry, Math.max(delayMs, MAX_RETRY_DELAY_MS));
  const asked = error instanceof VQueueClientError ? error.retryAfterMs : undefined;
  // A Retry-After from a proxy may ask for hours: never more than MAX_RETRY_AFTER_MS (timers also wrap past 2^31 - 1 ms).
  if (asked !== undefined) return Math.min(asked, MAX_RETRY_AFTER_MS) + Math.random() * (delayMs / 2);
  return backoff / 2 + Math.random() * (backoff / 2);
}

/**
 * Runs `call` until it succeeds, retrying transient errors (`isTransient`) with `retryDelay`
 * until `policy.timeoutMs` has passed (the last backoff is cut short to try once more at the
 * end; a `Retry-After` past the end is not waited for); then, or on any other error, rejects
 * with the last error. The caller's abort ends a wait at once (rejecting with its reason).
 */
export async function withRetries<T>(call: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const deadline = Date.now() + policy.timeoutMs;
  for (let retry = 0; ; retry++) {
    try {
      return await call();
    } catch (error) {
      const left = deadline - Date.now();
      if (!isTransient(error) || retry >= (policy.maxRetries ?? Infinity) || left <= 0 || policy.signal?.aborted) throw error;
      const asked = error instanceof VQueueClientError && error.retryAfterMs !== undefined;
      const wait = retryDelay(error, retry, policy.delayMs);
      if (asked && wait > left) throw error;
      policy.onRetry?.(error, Math.min(wait, left));
      await sleep(Math.min(wait, left), policy.signal);
      if (policy.signal?.aborted) throw policy.signal.reason ?? error;
    }
  }
}
