import { VQueueError } from "../../src/errors";

/** A user-facing error: printed as a clear message (no stack), exit code 1. */
export class CliError extends Error {
  override name = "CliError";
  readonly code = "E_CLI";
}

const LOCKED_HINT = "If a server is running on this directory, go through it: --url http://127.0.0.1:9093";

/** Explains the usual engine errors in CLI terms, with `what` was being done. */
export function explain(error: unknown, what: string): never {
  if (VQueueError.isError(error)) {
    const message = stripPrefix(error.message);
    if (error.code === "E_LOCKED") throw new CliError(`${message}\n${LOCKED_HINT}`);
    throw new CliError(`${what}: ${message}`);
  }
  if (isSystemError(error)) throw new CliError(`${what}: ${error.message}`);
  throw error;
}

/**
 * The message to print for an expected error, or undefined for a bug (which keeps its stack).
 * Expected: our own errors, the engine's (`VQueueError`), a bad configuration (`E_CONFIG`), the
 * option checks of the HTTP app (`[v-queue] ...` TypeErrors) and the system's (`EACCES`, ...).
 */
export function describeError(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error instanceof CliError || (error as { code?: unknown }).code === "E_CONFIG") return error.message;
  if (VQueueError.isError(error)) return error.code === "E_LOCKED" ? `${stripPrefix(error.message)}\n${LOCKED_HINT}` : stripPrefix(error.message);
  if (isSystemError(error)) return error.message;
  if (error instanceof TypeError && error.message.startsWith("[v-queue]")) return stripPrefix(error.message);
  return undefined;
}

/** An error of a system call (`EACCES: permission denied, open '...'`): its message says it all. */
function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === "string" && typeof (error as NodeJS.ErrnoException).syscall === "string";
}

const stripPrefix = (message: string) => message.replace(/^(\[v-queue\] )+(\[http\] )?/, "");
