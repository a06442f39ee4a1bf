/**
 * Following outcomes (docs/client.md, "Outcomes"): `events()`, a queue's consumer's outcome
 * events as an async iterator over server-sent events, and `finished()`, one message's end.
 */
import type { OutcomeEventJSON, OutcomeResponse } from "../protocol/api";
import { sleep } from "../src/core/sleep";
import { MessageDeadError, OutcomeTimeoutError, VQueueClientError, VQueueNetworkError, parseRetryAfter } from "./errors";
import { isTransient, retryDelay } from "./retry";

export interface EventsOptions {
  /** Where to start without `after`: `"now"` (what happens from now on) or `"oldest"` (every outcome still kept first). @default "now" */
  from?: "now" | "oldest";
  /** Resume after this event (its `cursor`): none missed, none twice. */
  after?: string;
  /** Ends the iteration (it returns, without an error). */
  signal?: AbortSignal;
}

/** A message whose outcome `finished()` waits for: where it is, or a produce's answer (its first message). */
export type OutcomeTarget = { part: number; offset: number; partition?: number } | { first: { part: number; offset: number }; partition?: number };

export interface FinishedOptions {
  /** How long to wait for the message's end; then `OutcomeTimeoutError`. `Infinity`: no end. @default 30000 */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** What the event stream needs of the client: the raw fetch (a stream outlives the client's request timeout). */
export interface StreamContext {
  fetch: typeof globalThis.fetch;
  /** The URL of a path under the client's base URL. */
  url(path: string): string;
  headers: Record<string, string>;
  /** The first wait before reconnecting; it doubles up to 2 s. */
  retryDelayMs: number;
}

/** The server sends a comment every 15 s: this long without a byte, the connection is taken for dead and made again. */
const SILENCE_MS = 45_000;
/** One long poll of `finished()` waits at most this long on the server (under its `limits.maxTimeoutMs` and most proxies' idle limits). */
const OUTCOME_STEP_MS = 20_000;

/**
 * The outcome events of `path` (a consumer's `/events`), as they come. A dropped connection is
 * made again after the last event seen (`Last-Event-ID`), as an `EventSource` does; an error the
 * server answers that a retry cannot mend (403, 404, 400...) is thrown.
 */
export async function* followEvents(ctx: StreamContext, path: string, options: EventsOptions = {}): AsyncGenerator<OutcomeEventJSON, void, undefined> {
  const { from = "now", signal } = options;
  if (from !== "now" && from !== "oldest") throw new TypeError(`Invalid events option from ${JSON.stringify(from)}: use "now" or "oldest".`);
  if (options.after !== undefined && typeof options.after !== "string") throw new TypeError(`Invalid events option after: a cursor (an event's "cursor").`);
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) stop.abort();
  let after = options.after;
  let failures = 0;
  /** The server's `retry:` field, when it sent one. */
  let serverRetryMs: number | undefined;
  try {
    while (!stop.signal.aborted) {
      const connection = new AbortController();
      const abortConnection = () => connection.abort();
      stop.signal.addEventListener("abort", abortConnection, { once: true });
      let silence: ReturnType<typeof setTimeout> | undefined;
      const heard = () => {
        clearTimeout(silence);
        silence = setTimeout(abortConnection, SILENCE_MS);
      };
      let failure: unknown;
      try {
        heard();
        const response = await ctx.fetch(ctx.url(`${path}?from=${from}`), {
          headers: { ...ctx.headers, accept: "text/event-stream", ...(after === undefined ? {} : { "last-event-id": after }) },
          signal: connection.signal,
        });
        if (!response.ok) throw await errorOf(response);
        if (!response.body) throw new VQueueClientError(response.status, "E_RESPONSE", "The event stream came without a body.");
        for await (const event of readServerEvents(response.body, heard)) {
          failures = 0;
          if (event.retry !== undefined) serverRetryMs = event.retry;
          // An id without data moves the place to resume from (where "now" was, say).
          if (event.id !== undefined) after = event.id;
          if (event.data === undefined) continue;
          const outcome = parseOutcome(event.data, response.status);
          after = event.id ?? outcome.cursor;
          yield outcome;
        }
        // The server ended the stream (it closed, or restarts): made again, as an EventSource does.
      } catch (error) {
        if (stop.signal.aborted) return;
        if (!connection.signal.aborted && error instanceof VQueueClientError && !isTransient(error)) throw error;
        failure = error;
      } finally {
        clearTimeout(silence);
        stop.signal.removeEventListener("abort", abortConnection);
        connection.abort();
      }
      const wait = failure === undefined && serverRetryMs !== undefined ? serverRetryMs : retryDelay(failure, failures++, ctx.retryDelayMs);
      await sleep(wait, stop.signal);
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    stop.abort();
  }
}

/** Long-polls `path` (a consumer's `/outcome`) in steps until the message ends: `completed` resolves, `dead` rejects. */
export async function waitFinished(
  get: (query: Record<string, number>, stepMs: number, signal: AbortSignal | undefined) => Promise<OutcomeResponse>,
  target: OutcomeTarget,
  options: FinishedOptions = {},
): Promise<OutcomeEventJSON> {
  const { timeoutMs = 30_000, signal } = options;
  if (typeof timeoutMs !== "number" || !(timeoutMs >= 0) || (timeoutMs !== Infinity && !Number.isSafeInteger(timeoutMs)))
    throw new TypeError(`Invalid finished option timeoutMs ${String(timeoutMs)}: an integer of ms from 0 up, or Infinity.`);
  const position = positionOf(target);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const stepMs = Math.min(OUTCOME_STEP_MS, Math.max(0, deadline - Date.now()));
    const { outcome } = await get({ ...position, timeoutMs: stepMs }, stepMs, signal);
    if (outcome?.kind === "completed") return outcome;
    if (outcome?.kind === "dead") throw new MessageDeadError(outcome);
    if (Date.now() >= deadline) throw new OutcomeTimeoutError(timeoutMs, position);
  }
}

// --- Internal helpers ---

function positionOf(target: OutcomeTarget): { part: number; offset: number; partition?: number } {
  const source = (target as { first?: unknown })?.first ?? target;
  const { part, offset } = (source ?? {}) as { part?: unknown; offset?: unknown };
  const partition = (target as { partition?: unknown })?.partition;
  if (!Number.isSafeInteger(part) || !Number.isSafeInteger(offset) || (partition !== undefined && !Number.isSafeInteger(partition)))
    throw new TypeError(
      `Invalid message ${JSON.stringify(target)}: give { part, offset } (and a partitioned queue's partition), or a produce's answer (not a delayed one: where it lands is known only then).`,
    );
  return partition === undefined
    ? { part: part as number, offset: offset as number }
    : { part: part as number, offset: offset as number, partition: partition as number };
}

function parseOutcome(data: string, status: number): OutcomeEventJSON {
  try {
    return JSON.parse(data) as OutcomeEventJSON;
  } catch (error) {
    throw new VQueueClientError(status, "E_RESPONSE", `Unreadable event: ${data.slice(0, 200)}`, { cause: error });
  }
}

/** A refused stream: the API's error body as a `VQueueClientError`. */
async function errorOf(response: Response): Promise<VQueueClientError> {
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
  const text = await response.text().catch(() => "");
  try {
    const { error } = JSON.parse(text) as { error?: { code?: string; message?: string } };
    if (error?.code) return new VQueueClientError(response.status, error.code as VQueueClientError["code"], error.message ?? "", { retryAfterMs });
  } catch {
    // not the API's body
  }
  return new VQueueClientError(response.status, "E_RESPONSE", `HTTP ${response.status} ${response.statusText}`.trim(), { retryAfterMs });
}

interface ServerEvent {
  id?: string;
  event?: string;
  data?: string;
  retry?: number;
}

/**
 * The events of a `text/event-stream` body (the WHATWG format: fields `id`, `event`, `data`,
 * `retry`, comments `:`, any line ending); `heard` is called at every chunk (a comment too).
 */
async function* readServerEvents(body: ReadableStream<Uint8Array>, heard: () => void): AsyncGenerator<ServerEvent, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event: ServerEvent = {};
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      heard();
      buffer += decoder.decode(value, { stream: true });
      // A "\r" at the very end may be half of a "\r\n": kept for the next chunk.
      const lines = buffer.split(/\r\n|\r(?!$)|\n/);
      buffer = lines.pop()!;
      for (const line of lines) {
        if (line === "") {
          if (event.data !== undefined || event.retry !== undefined || event.id !== undefined) yield event;
          event = {};
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") event.data = event.data === undefined ? text : `${event.data}\n${text}`;
        else if (field === "id" && !text.includes("\u0000")) event.id = text;
        else if (field === "event") event.event = text;
        else if (field === "retry" && /^\d+$/.test(text)) event.retry = Number(text);
      }
    }
  } catch (error) {
    throw new VQueueNetworkError(`The event stream dropped: ${(error as Error)?.message ?? String(error)}`, false, { cause: error });
  } finally {
    reader.cancel().catch(() => {});
  }
}
