import type { HttpErrorCode } from "../runtime/api";

/** The server answered with an error: `status`, and the API's `code` and `message`. */
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
