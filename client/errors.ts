import type { HttpErrorCode, OutcomeEventJSON } from "../protocol/api";

/**
 * The server answered with an error: `status`, and the API's `code` and `message`. `E_RESPONSE`:
 * an answer the client cannot read (an error without the API's body, a malformed binary batch).
 */
export class VQueueClientError extends Error {
  override name = "VQueueClientError";
  /** How long the server asked to wait before another try (its `Retry-After`), in ms; undefined when it did not say. */
  readonly retryAfterMs?: number;
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode | "E_RESPONSE",
    message: string,
    options?: { cause?: unknown; retryAfterMs?: number },
  ) {
    super(message, options);
    if (options?.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs;
  }
}

/** A `Retry-After` header in ms: delay-seconds or an HTTP date (RFC 9110 10.2.3); undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** No answer: the server is down or unreachable, the connection dropped, or the request timed out. */
export class VQueueNetworkError extends Error {
  override name = "VQueueNetworkError";
  constructor(
    message: string,
    readonly timeout: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The caller aborted the request (its `signal`). */
export function isAbortError(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

/**
 * Thrown by a `worker()` handler told to slow down (an API's 429, say), as BullMQ's: its message
 * goes back uncounted (not a failed delivery), and the whole consumer hands nothing out to any
 * worker for `delayMs` (`ctx.rateLimit(delayMs)`).
 */
export class RateLimitError extends Error {
  override name = "RateLimitError";
  constructor(
    readonly delayMs: number,
    message = `Rate limited: the consumer backs off for ${delayMs} ms.`,
  ) {
    super(message);
    if (!Number.isSafeInteger(delayMs) || delayMs < 0) throw new TypeError(`Invalid RateLimitError delayMs ${String(delayMs)}: use an integer from 0 up (ms).`);
  }

  /** Also one thrown by another copy of the client (its class is not this one). */
  static isRateLimit(error: unknown): error is RateLimitError {
    return (
      error instanceof RateLimitError || (error instanceof Error && error.name === "RateLimitError" && Number.isSafeInteger((error as RateLimitError).delayMs))
    );
  }
}

/**
 * `finished()`: the message went to the dead-letter queue (its deliveries ran out, or a nack
 * sent it there). `reason` is the error it failed with; `outcome` the whole `dead` event.
 */
export class MessageDeadError extends Error {
  override name = "MessageDeadError";
  readonly code = "E_DEAD";
  readonly reason: string | undefined;
  constructor(readonly outcome: OutcomeEventJSON) {
    super(
      `The message ${describePosition(outcome)} went to the dead-letter queue after ${outcome.deliveries} deliveries: ${outcome.error ?? "(no error given)"}`,
    );
    this.reason = outcome.error;
  }
}

/** `finished()`: the message did not end (completed or dead) within `timeoutMs`. It may still: its outcome can be asked again. */
export class OutcomeTimeoutError extends Error {
  override name = "OutcomeTimeoutError";
  readonly code = "E_TIMEOUT";
  constructor(
    readonly timeoutMs: number,
    position: { part: number; offset: number; partition?: number },
  ) {
    super(`The message ${describePosition(position)} did not end within ${timeoutMs} ms.`);
  }
}

const describePosition = ({ part, offset, partition }: { part: number; offset: number; partition?: number }) =>
  `${partition === undefined ? "" : `p${partition}:`}${part}.${offset}`;
