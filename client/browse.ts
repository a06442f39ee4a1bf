import type { BrowseResponse, OverviewResponse, QueueDetailResponse } from "../protocol/api";
import { fromJSONMessage, type AnyClientMessage, type ClientMessage } from "./messages";

/** Where a page starts: the oldest message, the newest page, after a cursor, at a message, or at a time. */
export type BrowseStart = "earliest" | "latest" | (string & {}) | { part: number; seq: number } | { time: Date | number | string };

export interface BrowseOptions {
  /** @default "earliest"; "latest": the last `limit` messages; a cursor (a page's `next`): the page after it */
  from?: BrowseStart;
  /** Most messages (1 to 1000). @default 50 */
  limit?: number;
  /** The page stops once its bodies reach this many bytes. @default 1 MiB (or the server's `limits.maxResponseBytes`) */
  maxBytes?: number;
  /** A partitioned queue: this partition alone (else a page takes from every partition in turn). */
  partition?: number;
  /** Parse text messages as JSON, as `consume` does. @default false */
  json?: boolean;
  signal?: AbortSignal;
}

/** A page of `browse`: messages as `consume` gives them, and where the next page starts (null at the end). */
export interface BrowseResult<T = never> {
  queue: string;
  messages: ClientMessage<T>[];
  next: string | null;
}

export type BrowseRequest = <T>(path: string, init: Record<string, unknown>) => Promise<T>;

/** The read-only calls of the dashboard: the message browser and the overviews. */
export function browseCalls(request: BrowseRequest, q: (queue: string) => string) {
  return {
    async browse(queue: string, opts: BrowseOptions = {}): Promise<{ queue: string; messages: AnyClientMessage[]; next: string | null }> {
      const query: Record<string, string | number> = { ...startQuery(opts.from ?? "earliest") };
      if (opts.limit !== undefined) query.limit = opts.limit;
      if (opts.maxBytes !== undefined) query.max_bytes = opts.maxBytes;
      if (opts.partition !== undefined) query.partition = opts.partition;
      const body = await request<BrowseResponse>(`${q(queue)}/browse`, { query, idempotent: true, signal: opts.signal });
      return { queue: body.queue, messages: body.messages.map((m) => fromJSONMessage(m, opts.json ?? false)), next: body.next };
    },
    overview: (opts: { history?: number; signal?: AbortSignal } = {}) =>
      request<OverviewResponse>("/api/v1/overview", { query: historyQuery(opts.history), idempotent: true, signal: opts.signal }),
    queueOverview: (queue: string, opts: { history?: number; signal?: AbortSignal } = {}) =>
      request<QueueDetailResponse>(`${q(queue)}/overview`, { query: historyQuery(opts.history), idempotent: true, signal: opts.signal }),
  };
}

function startQuery(from: BrowseStart): Record<string, string | number> {
  if (typeof from === "string") return { from };
  if ("time" in from) return { time: from.time instanceof Date ? from.time.getTime() : from.time };
  return { part: from.part, seq: from.seq };
}

const historyQuery = (history: number | undefined): Record<string, number> => (history === undefined ? {} : { history });
