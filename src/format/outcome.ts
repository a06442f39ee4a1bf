/**
 * A shared consumer's outcome log (`Q_info_outc_C`, docs/format.md#outcomes): what became of the
 * messages it handed out, one event per frame of a side log (storage/side-log.ts), each frame's
 * payload one JSON object. Event ids count up by one per event from 1 and are never reused: a
 * compaction, which drops the oldest events, starts the file with a `{"next":<id>}` frame, the
 * id the next event takes when no event is left.
 */
import { VQueueError } from "../core/errors";

/** How a message ended (`completed`, `dead`), failed once and comes again (`failed`), or how far its handler is (`progress`). */
export type OutcomeKind = "completed" | "failed" | "dead" | "progress";

export const OUTCOME_KINDS: readonly OutcomeKind[] = ["completed", "failed", "dead", "progress"];

/** An event as the log keeps it (of one queue: a partitioned queue's partition has its own log). */
export interface StoredOutcome {
  /** One more than the event before it in this log. */
  id: number;
  kind: OutcomeKind;
  /** When it happened (ms since the epoch). */
  at: number;
  part: number;
  offset: number;
  /** Its seq in its part, when the holder knew it (a message acked through an earlier holder's lease may lack it). */
  seq?: number;
  /** Its deliveries so far, this one included. */
  deliveries: number;
  /** `completed`: the value its worker gave with the ack. */
  result?: unknown;
  /** `progress`: the value its worker reported. */
  progress?: unknown;
  /** `failed`, `dead`: the error its worker gave with the nack. */
  error?: string;
  /** `failed`: when it may go out again (ms since the epoch). */
  retryAt?: number;
}

/** Largest result or progress value, as JSON: the log keeps outcomes, not payloads. */
export const MAX_OUTCOME_BYTES = 64 * 1024;

const utf8 = new TextEncoder();
const text = new TextDecoder();

/**
 * A result or progress value as JSON, checked: serializable and within `MAX_OUTCOME_BYTES`
 * (`E_OPTION` otherwise). `undefined` stays undefined (no value).
 */
export function outcomeValueJson(name: "result" | "progress", value: unknown): string | undefined {
  if (value === undefined) return undefined;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: it cannot be written as JSON (${(error as Error).message}); use JSON values (objects, arrays, strings, numbers, booleans, null).`,
    );
  }
  if (json === undefined)
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: a ${typeof value} cannot be written as JSON; use JSON values (objects, arrays, strings, numbers, booleans, null).`,
    );
  const bytes = utf8.encode(json).length;
  if (bytes > MAX_OUTCOME_BYTES)
    throw new VQueueError(
      "E_OPTION",
      `Invalid ${name}: ${bytes} bytes as JSON, the limit is ${MAX_OUTCOME_BYTES}; keep large data elsewhere and return where it is.`,
    );
  return json;
}

/**
 * An event's frame payload. `valueJson`: its result or progress as `outcomeValueJson` gave it
 * (spliced in as is: it was checked once, and is not parsed again).
 */
export function encodeOutcome(event: Omit<StoredOutcome, "result" | "progress">, valueJson?: string): Uint8Array {
  const { id, kind, at, part, offset, seq, deliveries, error, retryAt } = event;
  let json = `{"id":${id},"kind":"${kind}","at":${at},"part":${part},"offset":${offset}`;
  if (seq !== undefined) json += `,"seq":${seq}`;
  json += `,"deliveries":${deliveries}`;
  if (error !== undefined) json += `,"error":${JSON.stringify(error)}`;
  if (retryAt !== undefined) json += `,"retryAt":${retryAt}`;
  if (valueJson !== undefined) json += `,"${kind === "progress" ? "progress" : "result"}":${valueJson}`;
  return utf8.encode(`${json}}`);
}

/** A compaction's first frame: the id of the next event. */
export function encodeNextId(next: number): Uint8Array {
  return utf8.encode(`{"next":${next}}`);
}

/** A frame read back: an event, the next id (a compaction's first frame), or undefined when it is neither (reported by the caller). */
export function decodeOutcome(payload: Uint8Array): StoredOutcome | { next: number } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text.decode(payload));
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (Number.isSafeInteger(v.next) && Object.keys(v).length === 1) return { next: v.next as number };
  const ints = ["id", "at", "part", "offset", "deliveries"] as const;
  if (!ints.every((key) => Number.isSafeInteger(v[key]))) return undefined;
  if (!OUTCOME_KINDS.includes(v.kind as OutcomeKind)) return undefined;
  return v as unknown as StoredOutcome;
}

/** Whether a kind is a message's end: `completed` or `dead` (what `finished` waits for). */
export const isEnd = (kind: OutcomeKind): boolean => kind === "completed" || kind === "dead";
