/**
 * Every error the engine throws on purpose is a `VQueueError` with a stable `code`.
 * The HTTP layer maps codes to statuses; callers can branch on `error.code`.
 */
export type VQueueErrorCode =
  /** A queue or consumer name breaks the naming rule. */
  | "E_NAME"
  /** An option is missing, of the wrong type or out of range. */
  | "E_OPTION"
  /** A message is not a string, bytes or a JSON value, or is too large. */
  | "E_MESSAGE"
  /** Another writer (or reader of the same consumer) holds the lock. */
  | "E_LOCKED"
  /** A write by a holder whose lock was taken over by a newer one (a stale epoch): refused, nothing written. */
  | "E_FENCED"
  /** A second instance on a storage that cannot fence writes (the unstorage driver) is refused, and one superseded by another writes nothing. */
  | "E_UNFENCED"
  /** The queue (or consumer) does not exist and was not to be created. */
  | "E_NOT_FOUND"
  /** The object was closed. */
  | "E_CLOSED"
  /** A consumer name is opened as the other kind (ordered or shared) than it was created as. */
  | "E_KIND"
  /** A shared consumer's `nack` or `extend` names a lease that is no longer that worker's. */
  | "E_LEASE"
  /**
   * An ack, nack, extend or commit for a consumer another instance holds is stored in its inbox,
   * and no holder decided it in time (paused or busy, or gone): retry to learn the outcome.
   */
  | "E_PENDING"
  /** A commit names a message that was not handed out by this consumer. */
  | "E_CURSOR"
  /** A bound is reached: `maxDelayed` delayed messages are pending already. */
  | "E_FULL"
  /** A file is damaged beyond what recovery can skip. */
  | "E_CORRUPT"
  /** The storage driver failed. */
  | "E_IO";

/**
 * Put before a line where it is printed (a log line, the CLI's error output, a warning), never
 * into an error's `message`: the message says what happened, the printer says who says it.
 */
export const LOG_PREFIX = "[v-queue]";

export class VQueueError extends Error {
  override name = "VQueueError";
  readonly code: VQueueErrorCode;
  /**
   * An `E_LOCKED` no hand-over request can end (whether the holder lives cannot even be told):
   * said at once, not after waiting for a hand-over.
   */
  readonly unaskable: boolean;

  constructor(code: VQueueErrorCode, message: string, options?: { cause?: unknown; unaskable?: boolean }) {
    super(message, options);
    this.code = code;
    this.unaskable = options?.unaskable ?? false;
  }

  /** Works across realms and bundled copies, like h3's `HTTPError.isError`. */
  static isError(value: unknown): value is VQueueError {
    return value instanceof Error && value.name === "VQueueError" && typeof (value as VQueueError).code === "string";
  }
}

/**
 * Something recovery found and stepped over: never thrown, reported through the
 * `onProblem` option so that an operator sees it and the queue keeps going.
 */
export interface QueueProblem {
  code:
    | "TORN_TAIL"
    | "BAD_RECORD"
    | "BAD_INFO"
    | "BAD_POSITION"
    | "UNSUPPORTED_PART"
    /** A compressed v3 body that does not decompress, or not to the length it announces: skipped. */
    | "BAD_COMPRESSED"
    /** A compressed v3 body in a part whose dictionary is nowhere to be found: skipped. */
    | "NO_DICTIONARY"
    /** A part has no usable index (log/part-index.ts), so it is scanned instead. */
    | "NO_INDEX"
    /** Retention deleted messages a consumer had not read; `missed` says how many. */
    | "MISSED"
    /** A background retention round failed (it is tried again later). */
    | "PRUNE_FAILED"
    /** A shared consumer could not push a message to its dead-letter queue (it is tried again at the next poll). */
    | "DEAD_LETTER_FAILED"
    /** A shared consumer could not apply the acks in its inbox (consumers/state/ack-inbox.ts); it tries again soon. */
    | "INBOX_FAILED"
    /** A partition could not be opened for a batch without a key (storage, recovery): the batch went to another partition; it is tried again later. */
    | "PARTITION_SKIPPED"
    /** A shared consumer's outcome log could not be compacted: it keeps no more outcomes until the consumer is opened again. */
    | "OUTCOMES_STOPPED";
  message: string;
  queue: string;
  part?: number;
  offset?: number;
  /** Bytes stepped over (or cut off) at `offset`. */
  bytes?: number;
  /** `MISSED`: messages deleted by retention before this consumer read them. */
  missed?: number;
  /** `MISSED`: the consumer this is about. */
  consumer?: string;
}

/**
 * A storage failure as drivers report it: `E_IO`, with the storage's own error (and its `code`:
 * `EACCES`, `EMFILE`, ...) kept as `cause`. Our own errors pass through unchanged.
 */
export function ioError(driver: string, error: unknown): VQueueError {
  if (VQueueError.isError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  // Deno's node:fs says "No space left on device (os error 28)" without Node's "ENOSPC: " prefix:
  // put the code in front, so the message names it on every runtime (Node's is unchanged).
  const named = typeof code === "string" && /^E[A-Z]+$/.test(code) && !message.includes(code) ? `${code}: ${message}` : message;
  return new VQueueError("E_IO", `The ${driver} driver failed: ${named}`, { cause: error });
}
