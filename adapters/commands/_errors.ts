import { VQueueClientError, VQueueNetworkError } from "../../client/errors";
import { VQueueError } from "../../src/errors";
import { ZstdNativeError } from "../zstd-native";

/** A user-facing error: printed as a clear message (no stack), exit code 1. */
export class CliError extends Error {
  override name = "CliError";
  readonly code = "E_CLI";
}

const LOCKED_HINT = "If a server is running on this directory, go through it: --url http://127.0.0.1:9093";

/** Explains the usual engine errors in CLI terms, with `what` was being done. */
export function explain(error: unknown, what: string): never {
  if (VQueueError.isError(error)) {
    if (error.code === "E_LOCKED") throw new CliError(`${error.message}\n${LOCKED_HINT}`);
    throw new CliError(`${what}: ${error.message}`);
  }
  if (isSystemError(error)) throw new CliError(`${what}: ${error.message}`);
  throw error;
}

/**
 * The message to print for an expected error, or undefined for a bug (which keeps its stack).
 * Expected: our own errors, the engine's (`VQueueError`, option checks included), a bad
 * configuration (`E_CONFIG`), a native zstd asked for and not there, the system's (`EACCES`, ...) and,
 * with `--url`, the client's: a server's error answer and no answer at all.
 */
export function describeError(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error instanceof CliError || error instanceof ZstdNativeError || (error as { code?: unknown }).code === "E_CONFIG") return error.message;
  if (VQueueError.isError(error)) return error.code === "E_LOCKED" ? `${error.message}\n${LOCKED_HINT}` : error.message;
  if (isSystemError(error)) return error.message;
  if (error instanceof VQueueClientError) return `The server answered ${error.status} ${error.code}: ${error.message}`;
  // fetch says "fetch failed": what failed (ECONNREFUSED 127.0.0.1:9093, ...) is deeper in `cause`.
  if (error instanceof VQueueNetworkError) return error.timeout ? error.message : `No answer from the server: ${deepestCause(error).message}`;
  return undefined;
}

/** The last Error of a `cause` chain (bounded: a chain may loop). */
function deepestCause(error: Error): Error {
  let deepest = error;
  for (let e: unknown = error.cause, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) deepest = e;
  return deepest;
}

/** An error of a system call (`EACCES: permission denied, open '...'`): its message says it all. */
function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === "string" && typeof (error as NodeJS.ErrnoException).syscall === "string";
}

