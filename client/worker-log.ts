import { VQueueClientError, VQueueNetworkError } from "./errors";
import type { AnyLeasedMessage } from "./shared";

/** What a worker tells: its caller's `onError`, or without one these lines. */
export type WorkerEvent =
  /** A handler threw: its message is nacked (`deadLetter`: sent to the dead-letter queue). */
  | { kind: "failed"; error: unknown; message: AnyLeasedMessage; maxDeliveries?: number; deadLetter: boolean }
  /** A lease request failed and is tried again (the server restarting, busy, unreachable). */
  | { kind: "retrying"; error: unknown }
  /** A lease request succeeded after `retrying`. */
  | { kind: "recovered" }
  /** The queue does not exist (yet): the worker waits for it. */
  | { kind: "waiting"; error: unknown }
  /** An ack, nack or extend failed for good, or the server refused a lease of it. */
  | { kind: "lost"; error: unknown; message?: AnyLeasedMessage };

/** `queue/consumer` as the lines name a worker. */
export interface WorkerName {
  queue?: string;
  consumer?: string;
}

/**
 * The line a worker prints for an event without an `onError` (console.warn): one per event,
 * none while it waits for its queue; the handler's message and the API's errors without their
 * stack (they are expected), anything else with it.
 */
export function workerLine(event: WorkerEvent, name: WorkerName): string | undefined {
  const who = `[v-queue] worker ${name.queue ?? "?"}/${name.consumer ?? "?"}:`;
  switch (event.kind) {
    case "failed": {
      const { message, maxDeliveries, deadLetter } = event;
      const delivery = `delivery ${message.deliveries}${maxDeliveries !== undefined ? ` of ${maxDeliveries}` : ""}`;
      const where = `${message.partition !== undefined ? `partition ${message.partition} ` : ""}seq ${message.seq}`;
      const then = deadLetter ? "; sent to the dead-letter queue" : "";
      return `${who} message ${where} failed (${delivery}): ${messageOf(event.error)}${then}`;
    }
    case "retrying":
      return `${who} the server does not answer (${describe(event.error)}); retrying until it does`;
    case "recovered":
      return `${who} the server answers again`;
    case "waiting":
      return undefined;
    case "lost":
      return `${who} ${describe(event.error)}`;
  }
}

/** A thrown value's message, in one line. */
function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, " ");
}

/**
 * An expected error as its message in one line: the API's (with its code), the network's, the
 * engine's, or one the worker made (with one of those as its cause, or none). Anything else is
 * a bug somewhere: with its stack.
 */
function describe(error: unknown): string {
  const line = messageOf(error);
  const made = error instanceof Error && error.name === "Error";
  const inner = made && error.cause !== undefined ? error.cause : error;
  if (inner instanceof VQueueClientError) return `${line} (${inner.code})`;
  if (inner instanceof VQueueNetworkError || (inner instanceof Error && inner.name === "VQueueError") || (made && inner === error)) return line;
  return inner instanceof Error && inner.stack ? `${line}\n${inner.stack}` : line;
}
