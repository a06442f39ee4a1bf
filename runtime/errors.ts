import type { HttpErrorCode } from "../protocol/api";
import { ProtocolError } from "../protocol/errors";
import { LOG_PREFIX, VQueueError, type VQueueErrorCode } from "../src/core/errors";

export type { HttpErrorCode };

/** An error answered with `{ "error": { "code", "message" } }` and `status`. */
export class ApiError extends Error {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: HttpErrorCode,
    message: string,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
  }
}

const ENGINE_STATUS: Record<VQueueErrorCode, number> = {
  E_NAME: 400,
  E_OPTION: 400,
  E_MESSAGE: 400,
  E_LOCKED: 409,
  // This instance's lock was taken over (it was paused or cut off): another instance writes now, so a retry succeeds.
  E_FENCED: 503,
  // Another instance serves this storage, which cannot fence writes (unstorage): this one may not write.
  E_UNFENCED: 503,
  E_NOT_FOUND: 404,
  E_CLOSED: 503,
  // Stored for a consumer another instance holds, not decided by it yet: a retry (after Retry-After) learns the outcome.
  E_PENDING: 503,
  // A well-formed cursor for messages this server has not handed out (malformed ones are 400 E_PARAM).
  E_CURSOR: 409,
  E_KIND: 409,
  E_LEASE: 409,
  E_CORRUPT: 500,
  // A bound of the queue (maxDelayed), not of the request: retrying soon does not help (the client does not).
  E_FULL: 507,
  // The storage failed (the writer is reopened on the next push): a retry may succeed.
  E_IO: 503,
};

/** How the API answers a thrown value: its status, code, message (a fault's is generic) and headers. */
export interface ErrorAnswer {
  status: number;
  code: HttpErrorCode;
  message: string;
  headers?: Record<string, string>;
  /** What was answered for: the error itself, or the known one h3 wrapped. */
  error: unknown;
}

/** The answer for any thrown value, as `errorResponse` sends it (and a host app's error handler can). */
export function errorAnswer(error: unknown): ErrorAnswer {
  // h3 wraps what a handler throws: the original is in `cause`.
  const cause = (error as { cause?: unknown })?.cause;
  const known = (e: unknown) => e instanceof ApiError || VQueueError.isError(e) || ProtocolError.isError(e);
  const picked = known(error) ? error : known(cause) ? cause : error;
  // A body the wire format refuses (a binary batch): the client's fault.
  const mapped = ProtocolError.isError(picked) ? fromProtocolError(picked) : picked;
  // Out of file descriptors, however wrapped (the engine's E_IO included): a 503 to retry, not a fault.
  const err = !(mapped instanceof ApiError) && isTooManyFiles(error) ? tooManyFilesError() : mapped;
  if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message, headers: err.headers, error: err };
  if (VQueueError.isError(err)) {
    // A full disk is the storage's, not a passing fault: 507 Insufficient Storage.
    const status = err.code === "E_IO" && isOutOfSpace(err) ? 507 : (ENGINE_STATUS[err.code] ?? 500);
    // Another instance writes now (or holds what was asked for): a retry (after the hand-over) succeeds, here or there.
    const headers = err.code === "E_FENCED" || err.code === "E_LOCKED" || err.code === "E_PENDING" ? { "retry-after": String(BUSY_RETRY_AFTER) } : undefined;
    return { status, code: err.code, message: err.message, headers, error: err };
  }
  // h3's own 4xx (malformed URL, ...): keep the status, give it our shape.
  if (isHttpError(err) && err.status < 500)
    return { status: err.status, code: err.status === 404 ? "E_ROUTE" : err.status === 413 ? "E_TOO_LARGE" : "E_PARAM", message: err.message, error: err };
  return { status: 500, code: "E_INTERNAL", message: "Internal server error (logged by the server).", error: err };
}

/** The JSON error response for any thrown value; faults (5xx) are logged. */
export function errorResponse(error: unknown, logger: Pick<Console, "error">): Response {
  const { status, code, message, headers, error: err } = errorAnswer(error);
  // E_BUSY is expected under load (the registry warns when it starts); E_FENCED after a hand-over (counted in the metrics).
  if (status >= 500 && code !== "E_BUSY" && code !== "E_FENCED" && code !== "E_PENDING") logger.error(`${LOG_PREFIX} [http]`, err);
  return jsonError(status, code, message, headers);
}

/** The content type of every JSON answer. */
export const JSON_TYPE = "application/json; charset=utf-8";

export function jsonError(status: number, code: HttpErrorCode, message: string, headers?: Record<string, string>): Response {
  return new Response(JSON.stringify({ error: { code, message } }), {
    status,
    headers: { "content-type": JSON_TYPE, ...headers },
  });
}

/** Seconds a client is told to wait after a 503 `E_BUSY`: idle consumers close meanwhile. */
export const BUSY_RETRY_AFTER = 1;

/** 503 `E_BUSY` with `Retry-After`. */
export function busyError(message: string): ApiError {
  return new ApiError(503, "E_BUSY", message, { "retry-after": String(BUSY_RETRY_AFTER) });
}

/** A request body the wire format refuses: 400 `E_BODY`, or 413 when it holds too many messages. */
export function fromProtocolError(error: ProtocolError): ApiError {
  return error.code === "E_TOO_MANY" ? new ApiError(413, "E_TOO_LARGE", error.message) : new ApiError(400, "E_BODY", error.message);
}

function tooManyFilesError(): ApiError {
  return busyError("The server has too many open files (EMFILE): retry later.");
}

/** True for EMFILE/ENFILE (the process or the system is out of file descriptors), anywhere in the `cause` chain. */
export function isTooManyFiles(error: unknown): boolean {
  return hasCode(error, ["EMFILE", "ENFILE"]);
}

/** True for ENOSPC/EDQUOT (no space left, or over quota) anywhere in the `cause` chain. */
function isOutOfSpace(error: unknown): boolean {
  return hasCode(error, ["ENOSPC", "EDQUOT"]);
}

function hasCode(error: unknown, codes: string[]): boolean {
  // Bounded: a cause chain may loop.
  for (let e = error, depth = 0; e && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (codes.includes((e as { code?: string }).code as string)) return true;
  }
  return false;
}

function isHttpError(value: unknown): value is { status: number; message: string } {
  return value instanceof Error && value.name === "HTTPError" && typeof (value as { status?: unknown }).status === "number";
}
