/**
 * Errors of the wire format itself, thrown by decoders that both ends use: the server maps
 * them to its 4xx answers (a bad request body), the client to `VQueueClientError` (a bad
 * response body). Neither side's error class belongs here: a malformed response is not a 400.
 */

export type ProtocolErrorCode =
  /** Bytes that are not what the format says (bad magic, cut off, invalid UTF-8 in text, ...). */
  | "E_BODY"
  /** Well-formed, but more messages than the decoder was told to take. */
  | "E_TOO_MANY";

export class ProtocolError extends Error {
  override name = "ProtocolError";
  constructor(
    readonly code: ProtocolErrorCode,
    message: string,
  ) {
    super(message);
  }

  /** Also true for one from another copy of this module (two bundles in one page). */
  static isError(value: unknown): value is ProtocolError {
    return (
      value instanceof ProtocolError || (value instanceof Error && value.name === "ProtocolError" && typeof (value as { code?: unknown }).code === "string")
    );
  }
}
