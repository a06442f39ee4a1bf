import type { HttpErrorCode } from "../protocol/api";

/**
 * The server answered with an error: `status`, and the API's `code` and `message`. `E_RESPONSE`:
 * an answer the client cannot read (an error without the API's body, a malformed binary batch).
 */
export class VQueueClientError extends Error {
  override name = "VQueueClientError";
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode | "E_RESPONSE",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
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
