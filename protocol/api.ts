// Over 300 lines: every JSON shape of the API in one file, so that server, client and CLI cannot drift apart.
/**
 * The shapes of the HTTP API's JSON bodies and its error codes: one source of truth for the
 * server's routes, the client SDK (`v-queue/client`) and the CLI. Type-only: importing it
 * costs nothing at run time.
 */
import type { VQueueErrorCode } from "../src/core/errors";
import type { StoredOutcome } from "../src/format/outcome";

export type { OutcomeKind } from "../src/format/outcome";

/** The codes of error bodies: the engine's `E_*` codes pass through, and the HTTP layer's own. */
export type HttpErrorCode =
  | VQueueErrorCode
  /** No or wrong credentials (401). */
  | "E_AUTH"
  /** Authenticated, but without the right for this queue (403). */
  | "E_FORBIDDEN"
  /** No such route (404). */
  | "E_ROUTE"
  /** The route exists, not with this method (405). */
  | "E_METHOD"
  /** A query parameter or header is missing, malformed or out of range (400). */
  | "E_PARAM"
  /** The body is not valid for this route (400). */
  | "E_BODY"
  /** The body is larger than `limits.maxBodyBytes` (413). */
  | "E_TOO_LARGE"
  /** A content type this route does not take (415). */
  | "E_MEDIA_TYPE"
  /** What the request would make conflicts with what exists: a queue declared with another partition count, or an ordinary queue of that name (409). */
  | "E_CONFLICT"
  /** The server is shutting down (503). */
  | "E_SHUTDOWN"
  /** Out of file descriptors (EMFILE/ENFILE), or `maxConsumers` busy at once: retry after `Retry-After` seconds (503). */
  | "E_BUSY"
  /** An unexpected fault, logged by the server (500). */
  | "E_INTERNAL";

/** Where a message is in its queue (and where a produced one landed): what every message shape shares. */
export interface MessagePositionJSON {
  part: number;
  offset: number;
  seq: number;
}

/** A message as the JSON API gives it. */
export interface MessageJSON extends MessagePositionJSON {
  /** A partitioned queue's message: its partition (`part`, `offset`, `seq` are positions in it; `cursor` is `p<partition>:...`). */
  partition?: number;
  type: "string" | "object";
  /** Text for `string` messages; base64 for `object` (bytes) messages. */
  data: string;
  /** Present (`"base64"`) when `data` is base64. */
  encoding?: "base64";
  /** Commits up to and including this message. */
  cursor: string;
}

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
  /** A partitioned queue: its partition count (totals summed over them; `id` and `count_pushed` 0), and each partition's numbers. */
  partitions?: number;
  partitionQueues?: { name: string; partition: number; id: number; parts: number; messages: number; bytes: number }[];
}

/** `PUT /api/v1/queues/{queue}`: declares a partitioned queue (docs/partitioned.md). */
export interface DeclareQueueRequest {
  /** 1 to 1024; never changes once declared. */
  partitions: number;
}

/** `PUT /api/v1/queues/{queue}`: 201 when this request declared it, 200 when it already was so. */
export interface DeclareQueueResponse {
  queue: string;
  partitions: number;
  created: boolean;
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
  /** `ordered`: one cursor (consume, commit); `shared`: leases and acks per message (lease, ack, nack). */
  kind: "ordered" | "shared";
  /** A shared consumer this server holds open: leases running now. */
  inFlight?: number;
  /** A shared consumer this server holds open: hand-outs of messages handed out before, since it was opened. */
  redelivered?: number;
  /** A shared consumer this server holds open: messages moved to its dead-letter queue since it was opened. */
  deadLettered?: number;
  /** A shared consumer this server holds open: the oldest message it read and is not acknowledged, or null. */
  oldestUnacked?: MessagePositionJSON | null;
  /** A shared consumer this server holds open, handing nothing out (backing off, or its rate limit's window spent): until when (ms since the epoch). */
  limitedUntil?: number;
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
  /**
   * Present when retention deleted messages this consumer had not read yet: how many, since
   * the previous consume (it goes on at the oldest message left). The binary answer has it in
   * the `x-vq-missed` header.
   */
  missed?: number;
}

/** `POST /api/v1/queues/{queue}/consumers/{consumer}/commit` */
export interface CommitResponse {
  queue: string;
  consumer: string;
  /** The cursor committed: the one given, or the one of everything handed out. */
  committed: string;
}

/** `POST /api/v1/queues/{queue}/consumers/{consumer}/rewind` */
/**
 * `POST .../seek` body: where to move the consumer (a cursor, a message by part and sequence:
 * it comes next, or a time: an ISO 8601 date or ms since the epoch; the consumer then gets
 * every message written from then on, and up to the queue's `indexInterval` before it).
 */
export interface SeekRequest {
  to: "earliest" | "latest" | (string & {}) | { part: number; seq: number } | { time: string | number };
}

/** `POST /api/v1/queues/{queue}/prune` body (optional): limits that override the server's retention for this call. */
export interface PruneRequest {
  maxAgeMs?: number;
  maxBytes?: number;
  maxParts?: number;
  deleteConsumed?: boolean;
}

/** `POST /api/v1/queues/{queue}/prune`: what was deleted (whole parts, oldest first). */
export interface PruneResponse {
  queue: string;
  /** The part ids deleted. */
  parts: number[];
  messages: number;
  bytes: number;
  /** Why nothing could be deleted safely, when that is the case. */
  refused?: string;
  /** A partitioned queue: each partition's (the limits apply to each; `parts` above is empty, the sums are over them). */
  partitions?: { partition: number; parts: number[]; messages: number; bytes: number; refused?: string }[];
}

/** `POST .../seek`: where the next consume starts, as a cursor (saved). */
export type SeekResponse = RewindResponse;

export interface RewindResponse {
  queue: string;
  consumer: string;
  /** Where the next consume starts again: the committed position, as a cursor. */
  cursor: string;
}

/** `POST /api/v1/queues/{queue}/messages` (201) */
export interface ProduceResponse {
  queue: string;
  count: number;
  first: MessagePositionJSON;
  last: MessagePositionJSON;
  /** A partitioned queue: the partition the batch went to (`first` and `last` are positions in it). */
  partition?: number;
}

/**
 * `POST /api/v1/queues/{queue}/messages` with `delayMs` or `at` (202): kept aside, delivered to
 * no consumer before `until`; where they land is known only then. With an `Idempotency-Key`
 * already accepted, the first answer again (its status too), with `Idempotency-Replayed: true`.
 */
export interface DelayedProduceResponse {
  queue: string;
  count: number;
  /** A partitioned queue: the partition the batch will enter. */
  partition?: number;
  delayed: {
    /** When the messages enter the queue: ISO 8601. */
    until: string;
    /** The same, in ms since the epoch. */
    untilMs: number;
  };
}

/**
 * `PUT /api/v1/queues/{queue}/schedules/{name}`: exactly one of `cron` (5 fields, or 6 with
 * seconds first; read in `tz`, an IANA time zone, UTC by default) and `everyMs`. `message`: what
 * each firing produces (a string as text, any other JSON value as its JSON text; with `"encoding":
 * "base64"` a base64 string stored as bytes); none: `{"schedule","tick","at"}` of the firing.
 */
export interface ScheduleRequest {
  cron?: string;
  tz?: string;
  everyMs?: number;
  message?: unknown;
  encoding?: "base64";
}

/** A schedule: its timing, its message and its firings (times in ISO 8601, and in ms since the epoch). */
export interface ScheduleJSON {
  name: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  /** What each firing produces: text, or base64 bytes (`encoding`); absent: `{"schedule","tick","at"}`. */
  message?: string;
  encoding?: "base64";
  /** When it was set with this timing (no tick before). */
  since: string;
  sinceMs: number;
  /** The tick of the last firing produced. */
  lastFiredAt?: string;
  lastFiredAtMs?: number;
  /** The tick of the next firing. */
  nextAt?: string;
  nextAtMs?: number;
}

/** `PUT /api/v1/queues/{queue}/schedules/{name}`: 201 when created, 200 when updated. */
export interface ScheduleResponse {
  queue: string;
  created: boolean;
  schedule: ScheduleJSON;
}

/** `GET /api/v1/queues/{queue}/schedules` */
export interface ScheduleListResponse {
  queue: string;
  schedules: ScheduleJSON[];
}

/** `DELETE /api/v1/queues/{queue}/schedules/{name}` (404 when there is none) */
export interface DeleteScheduleResponse {
  queue: string;
  name: string;
  deleted: true;
}

/** `DELETE /api/v1/queues/{queue}/consumers/{consumer}` */
export interface DeleteConsumerResponse {
  queue: string;
  consumer: string;
  deleted: true;
}

/** `DELETE /api/v1/queues/{queue}` (needs the admin right) */
export interface DeleteQueueResponse {
  queue: string;
  deleted: true;
  /** Parts removed, and the consumers whose saved positions went with them. */
  parts: number;
  consumers: string[];
}

/** `POST /api/v1/queues/{queue}/purge` (needs the admin right) */
export interface PurgeResponse {
  queue: string;
  /** Messages, bytes and parts removed. */
  messages: number;
  bytes: number;
  parts: number;
  /** The new current part, where every consumer now is: ids never go back, so older cursors name nothing after it (a partitioned queue: the highest of its partitions'). */
  part: number;
  /** A partitioned queue: how many of its partitions were purged (those never written have nothing). */
  partitions?: number;
}

/** `POST .../consumers/{consumer}/lease` body (all optional). */
export interface LeaseRequest {
  /** Most messages to lease. @default 100 */
  max?: number;
  /** How long the leases run. @default the server's `shared.leaseMs` */
  leaseMs?: number;
  /** Long poll: wait up to this long for a first message. @default 0 */
  timeoutMs?: number;
}

/** A leased message: ack, nack or extend it with `lease`. */
export interface LeasedMessageJSON extends Omit<MessageJSON, "cursor"> {
  /** The lease token `"<part>.<offset>.<lease>"`; of a partitioned queue `"p<partition>:<part>.<offset>.<lease>"`. */
  lease: string;
  /** Times it was handed out, this one included. */
  deliveries: number;
  /** When the lease runs out (ms since the epoch, the server's clock). */
  leaseUntil: number;
  /** Its priority, when it was produced with one above 0. */
  priority?: number;
}

/** `POST .../lease` (JSON). */
export interface LeaseResponse {
  messages: LeasedMessageJSON[];
  /** The server's clock when it answered (ms since the epoch): `leaseUntil - now` is how long the leases run. */
  now: number;
}

/** A lease of a batch that could not be acked, nacked or extended (the rest of the batch was). */
export interface LeaseErrorJSON {
  lease: string;
  code: HttpErrorCode;
  message: string;
}

/** `POST .../ack` body. */
export interface AckRequest {
  leases: string[];
  /** A result per lease token (any JSON, at most 64 KiB as JSON): kept with the message's `completed` outcome. */
  results?: Record<string, unknown>;
}

/** `POST .../ack`: answered once the acks are durable. */
export interface AckResponse {
  acked: number;
  errors: LeaseErrorJSON[];
}

/** `POST .../nack` body. */
export interface NackRequest {
  leases: string[];
  /** They come again after this long. @default 0 */
  delayMs?: number;
  /** Why they failed: kept with a dead letter. */
  error?: string;
  /** Send them to the dead-letter queue now. */
  deadLetter?: boolean;
}

export interface NackResponse {
  nacked: number;
  errors: LeaseErrorJSON[];
}

/** `POST .../extend` body. */
export interface ExtendRequest {
  leases: string[];
  /** From now. @default the consumer's `leaseMs` */
  leaseMs?: number;
}

/** `POST .../progress` body: a progress update of a leased message (any JSON, at most 64 KiB as JSON). */
export interface ProgressRequest {
  lease: string;
  progress: unknown;
}

/** `POST .../progress`: answered once durable. */
export interface ProgressResponse {
  ok: true;
}

/**
 * One outcome event of a shared consumer's message, as `GET .../events` (server-sent events) and
 * `GET .../outcome` give it: `progress`, `completed` (with the ack's `result`), `failed` (with
 * `error` and `retryAt`), `dead` (with `error`); its `cursor` resumes a stream after it.
 */
export type OutcomeEventJSON = StoredOutcome & {
  /** A partitioned queue's: the message's partition. */
  partition?: number;
  /** Where the stream is after this event (the SSE id): `after` resumes after it. */
  cursor: string;
};

/** `GET .../outcome`: the message's end (`completed` or `dead`), or null when none came within `timeoutMs`. */
export interface OutcomeResponse {
  outcome: OutcomeEventJSON | null;
}

export interface ExtendResponse {
  extended: { lease: string; leaseUntil: number }[];
  errors: LeaseErrorJSON[];
}

/** `POST /api/v1/queues/{q}/consumers/{c}/backoff` body: nothing is handed out to anyone for `delayMs`. */
export interface BackOffRequest {
  delayMs: number;
}

/** `POST /api/v1/queues/{q}/consumers/{c}/backoff` answer. */
export interface BackOffResponse {
  /** Nothing is handed out before then (ms since the epoch, the server's clock): a back-off already running that ends later is kept. */
  limitedUntil: number;
}

/** `POST /api/v1/queues/{dlq}/redrive` body (optional). */
export interface RedriveRequest {
  /** The queue to move them to. @default each dead letter's origin queue */
  to?: string;
  /** Most messages moved by this call. @default 1000 */
  max?: number;
}

export interface RedriveResponse {
  moved: number;
}

/** A right of the API's users, as the dashboard is told which actions to offer. */
export type RightName = "read" | "write" | "admin";

/** Series over the last samples, column by column (uPlot's shape): `t` in seconds since the epoch. */
export interface HistoryJSON {
  t: number[];
  /** Messages produced per second. */
  produce?: number[];
  /** Messages consumed per second (a queue: all its consumers together). */
  consume?: number[];
  /** Messages not consumed yet (a queue: its worst consumer). */
  lag?: number[];
}

/**
 * One queue in the monitor's last sample. A queue the user may only write to is listed with
 * its name and rights, and zeros for the rest (nothing of what it holds).
 */
export interface QueueOverviewJSON {
  name: string;
  messages: number;
  /** Bytes of its part files. */
  bytes: number;
  parts: number;
  consumers: number;
  /** Messages produced per second, over the last sample interval. */
  produceRate: number;
  /** Messages consumed per second by all its consumers together. */
  consumeRate: number;
  /** The worst consumer's lag (0 without consumers), and who it is. */
  maxLag: number;
  maxLagConsumer: string | null;
  /** Produced (and consumed by all consumers) since this server started watching. */
  producedTotal: number;
  consumedTotal: number;
  /** What the asking user may do on it. */
  rights: RightName[];
  /** A partitioned queue: its partition count (the numbers above are summed over its partitions). */
  partitions?: number;
  /** With `?history=N`: the last N samples. */
  history?: HistoryJSON;
}

/** `GET /api/v1/overview[?history=N]`: every queue the user may see, from the monitor's last sample (no part file read). */
export interface OverviewResponse {
  version: string;
  /** The asking user (null without auth). */
  user: string | null;
  /** Rights the user has on some queue (`write`: may create queues by producing). */
  rights: RightName[];
  startedAt: number;
  /** When the sample was taken (ms since the epoch), and how often they are taken. */
  sampledAt: number;
  sampleMs: number;
  queues: QueueOverviewJSON[];
  /**
   * Queues not read yet, by name: only right after a start, when the first sample takes longer
   * than the monitor's `firstAnswerMs`. They are missing from `queues` until the sample reaches
   * them (the next poll); empty otherwise.
   */
  pending: string[];
}

/** A part of a queue, as `GET /api/v1/queues/{queue}/overview` shows it. */
export interface PartOverviewJSON {
  id: number;
  bytes: number;
  messages: number;
  /** The record format of its first record: v2, v3 (null when empty or unknown). */
  format: "v2" | "v3" | null;
  /** v3 parts with compressed records: body bytes before compression / stored (null: none compressed). */
  compressionRatio: number | null;
  /** When its first message was written, ms since the epoch (from the part index; null if unknown). */
  createdAt: number | null;
}

/** A consumer of either kind, as the queue's overview shows it. */
export interface ConsumerOverviewJSON {
  name: string;
  kind: "ordered" | "shared";
  part: number;
  position: number;
  count: number;
  cursor: string;
  lag: number;
  lagBytes: number;
  /** Messages consumed per second over the last sample interval. */
  rate: number;
  consumedTotal: number;
  /** Last time its position moved, or this server handed it messages (ms since the epoch; null: not seen since start). */
  lastSeen: number | null;
  /** Shared consumers: leases running, re-deliveries, dead letters (this server's live counts when it holds it, else from its files). */
  inFlight?: number;
  redelivered?: number;
  deadLettered?: number;
  oldestUnacked?: (MessagePositionJSON & { deliveries?: number }) | null;
  history?: HistoryJSON;
}

/** `GET /api/v1/queues/{queue}/overview[?history=N]` */
export interface QueueDetailResponse {
  queue: QueueOverviewJSON;
  /** Its parts (none for a partitioned queue: see each partition, by its name `<queue>.p<k>`). */
  parts: PartOverviewJSON[];
  /** A partitioned queue: each partition's row (as a queue's, named `<queue>.p<k>`), with its index. */
  partitions?: (QueueOverviewJSON & { partition: number })[];
  consumers: ConsumerOverviewJSON[];
  /** Its shared consumers' dead-letter queue (`<queue>.dead` unless configured) when it exists and the user may read it. */
  deadLetterQueue: string | null;
  /** A partitioned queue: its partitions' own dead-letter queues (`<queue>.p<k>.dead`, the default) that exist and the user may read. */
  deadLetterQueues?: string[];
  /** Rights the user has on some queue (as `OverviewResponse.rights`). */
  rights: RightName[];
}

/** `GET /api/v1/queues/{queue}/browse?from=...&limit=...`: messages read without any consumer (no position moves). */
export interface BrowseResponse {
  queue: string;
  messages: MessageJSON[];
  /** Where the next page starts (a cursor for `from`), null at the end. */
  next: string | null;
}

/** Every 4xx and 5xx body. */
export interface ErrorResponse {
  error: { code: HttpErrorCode; message: string };
}
