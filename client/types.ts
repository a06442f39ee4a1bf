/** The types the client's modules share (here, so that none imports another for them). */
import type { ClientMessage } from "./messages";

export interface ConsumeOptions {
  /** @default 1 (as the Rust server) */
  maxMessages?: number;
  /** Wait up to this long for a first message (long poll). @default 0: answer at once */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** `"binary"`: a compact binary batch instead of JSON (faster, no base64). @default "json" */
  format?: "json" | "binary";
  /**
   * Parse text messages as JSON: each is then `{ json: true, data: T }`, or, when it is not
   * valid JSON, `{ json: false, data: text, error }` (the rest of the batch is still parsed).
   * Bytes are never parsed. @default false
   */
  json?: boolean;
  /** A cursor to commit first, in the same request (saves a round trip per batch). */
  commit?: string;
}

/** `ConsumeResult` of a plain consume; `ConsumeResult<T>` of one with `json: true`. */
export interface ConsumeResult<T = never> {
  messages: ClientMessage<T>[];
  /** Commits everything in this batch; undefined when it is empty. */
  cursor: string | undefined;
  /** Messages retention deleted before this consumer read them, since its previous consume (0 almost always). */
  missed: number;
}
