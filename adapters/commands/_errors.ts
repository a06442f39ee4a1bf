import { VQueueClientError, VQueueNetworkError } from "../../client/errors";
import { VQueueError } from "../../src/core/errors";
import { DEFAULT_DIR } from "../defaults";
import { serversOf } from "../server-record";
import { ZstdNativeError } from "../zstd-native";

/** A user-facing error: printed as a clear message (no stack), exit code 1. */
export class CliError extends Error {
  override name = "CliError";
  readonly code = "E_CLI";
}

/** Explains the usual engine errors in CLI terms, with `what` was being done (`E_LOCKED` goes on as it is: `lockedHint` names the holder). */
export function explain(error: unknown, what: string): never {
  if (VQueueError.isError(error)) {
    if (error.code === "E_LOCKED") throw error;
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
  if (VQueueError.isError(error)) return error.message;
  if (isSystemError(error)) return error.message;
  if (error instanceof VQueueClientError) return `The server answered ${error.status} ${error.code}: ${error.message}`;
  // fetch says "fetch failed": what failed (ECONNREFUSED 127.0.0.1:9093, ...) is deeper in `cause`.
  if (error instanceof VQueueNetworkError) return error.timeout ? error.message : `No answer from the server: ${deepestCause(error).message}`;
  return undefined;
}

/**
 * What to do about `E_LOCKED` in direct mode: go through the server that serves the directory
 * (its URL, from the record each server keeps: server-record.ts), or, when none is known, say so
 * rather than guess one.
 */
export async function lockedHint(target: { dir?: string; storage?: string; url?: string }): Promise<string> {
  if (target.url) return "";
  const servers = target.storage ? [] : await serversOf(target.dir ?? DEFAULT_DIR);
  if (servers.length === 1) return `A server serves this directory at ${servers[0]}: go through it with --url ${servers[0]}`;
  if (servers.length > 1) return `Servers serve this directory at ${servers.join(", ")}: go through one of them with --url (e.g. --url ${servers[0]})`;
  const where = target.storage ? "this storage" : "this directory";
  return `Its holder is not known: no running server says it serves ${where} (another v-queue process holds it, or a server on another host). Go through the server that holds it with --url <its URL>, or stop that process.`;
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
