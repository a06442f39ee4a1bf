/**
 * The shapes of the HTTP API's JSON bodies: one source of truth for the server's routes and
 * the client SDK (`v-queue/client`). Type-only: importing it costs nothing at run time.
 */
import type { MessageJSON } from "./codec";
import type { HttpErrorCode } from "./errors";

export type { MessageJSON, HttpErrorCode };

/** `GET /health` */
export interface HealthResponse {
  status: "ok";
  version: string;
}

/** `GET /api/v1/queues` */
export interface QueueListResponse {
  queues: string[];
}

/** `GET /api/v1/queues/{queue}`: the Rust server's fields, then totals over every part. */
export interface QueueInfoResponse {
  name: string;
  /** The writer's current part. */
  id: number;
  /** Records in the current part. */
  count_pushed: number;
  is_ready: boolean;
  parts: number;
  messages: number;
  bytes: number;
  consumers: number;
}

/** One consumer in `GET /api/v1/queues/{queue}/consumers`. */
export interface ConsumerInfo {
  name: string;
  part: number;
  /** Byte position in `part` of the next message. */
  position: number;
  /** Messages read (committed) in `part`. */
  count_popped: number;
  /** Messages pushed and not yet committed. */
  lag: number;
  /** The committed position as a cursor. */
  cursor: string;
}

/** `GET /api/v1/queues/{queue}/consumers` */
export interface ConsumerListResponse {
  queue: string;
  consumers: ConsumerInfo[];
}

/** `GET /api/v1/queues/{queue}/consumers/{consumer}/messages` (JSON) */
export interface ConsumeResponse {
  queue: string;
  consumer: string;
  count: number;
  /** Commits everything in this response; null when it is empty. */
  cursor: string | null;
  messages: MessageJSON[];
}

/** `POST /api/v1/queues/{queue}/consumers/{consumer}/commit` */
export interface CommitResponse {
  queue: string;
  consumer: string;
  /** The cursor committed: the one given, or the one of everything handed out. */
  committed: string;
}

/** `POST /api/v1/queues/{queue}/consumers/{consumer}/rewind` */
export interface RewindResponse {
  queue: string;
  consumer: string;
  /** Where the next consume starts again: the committed position, as a cursor. */
  cursor: string;
}

/** Where a message landed. */
export interface MessagePositionJSON {
  part: number;
  offset: number;
  seq: number;
}

/** `POST /api/v1/queues/{queue}/messages` (201) */
export interface ProduceResponse {
  queue: string;
  count: number;
  first: MessagePositionJSON;
  last: MessagePositionJSON;
}

/** `DELETE /api/v1/queues/{queue}/consumers/{consumer}` */
export interface DeleteConsumerResponse {
  queue: string;
  consumer: string;
  deleted: true;
}

/** Every 4xx and 5xx body. */
export interface ErrorResponse {
  error: { code: HttpErrorCode; message: string };
}
