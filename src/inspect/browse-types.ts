/** The types of browsing (inspect/browse.ts) that inspect/browse-partitioned.ts shares. */
import type { QueueProblem } from "../core/errors";
import type { Message } from "../format/message";
import type { SeekTarget } from "../log/seek";
import type { ZstdLoader } from "../compression/zstd";

/**
 * Where a page starts: as a seek (`SeekTarget`: a cursor is the position after its message, so
 * the page starts with the message after it, the one a consumer seeking there reads next), but
 * `"latest"` is the newest page: the last `limit` messages, not the empty end (a `maxBytes` that
 * cuts it short leaves `next` set: the rest of it). Pages go forward only; an older page than the
 * newest is reached from an earlier start (`{ part, seq }`, `{ time }`).
 */
export type BrowseFrom = SeekTarget;

export interface BrowseOptions {
  /** @default "earliest" */
  from?: BrowseFrom;
  /** Most messages in the page. @default 50, at most 1000 */
  limit?: number;
  /** The page stops once its bodies reach this many bytes (at least one message). @default 1 MiB */
  maxBytes?: number;
  /** Text as its UTF-8 bytes, not decoded (what the HTTP layer writes out). @default false */
  raw?: boolean;
  zstd?: ZstdLoader;
  onProblem?: (problem: QueueProblem) => void;
  /**
   * A partitioned queue: this partition alone (`from` as for a plain queue, or a composite cursor
   * naming it). Without it a page takes from every partition in turn (inspect/browse-partitioned.ts).
   */
  partition?: number;
}

/** A message browsed: a partitioned queue's carries its partition. */
export type BrowsedMessage = Message & { partition?: number };

export interface BrowseResult {
  messages: BrowsedMessage[];
  /** A cursor where the next page starts, or null at the current end of the queue (a partitioned queue's names its partitions). */
  next: string | null;
  /** Where this page stopped, more there or not: the cursor to start after later, to see what comes since. */
  end: string;
  /** Messages retention deleted between `from` and what was read (also reported as `MISSED`). */
  missed: number;
}

/** Browse options with the page's start and limits set (defaulted and checked once, in `browseMessages`). */
export type PageOptions = BrowseOptions & { from: BrowseFrom; limit: number; maxBytes: number };
