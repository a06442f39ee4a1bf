// Over 300 lines: the client interface with its docs and the one request function every call shares; the calls themselves live in sibling files.
/**
 * `v-queue/client`: a typed client of the v-queue HTTP API, on ofetch. Web-standard only (no
 * Node import): it runs in browsers, workers and Node alike.
 */
import { createFetch, ofetch, type $Fetch, type FetchError, type FetchOptions } from "ofetch";
import type {
  AckResponse,
  BackOffResponse,
  CommitResponse,
  ExtendResponse,
  NackResponse,
  OutcomeEventJSON,
  OutcomeResponse,
  ProgressResponse,
  RedriveResponse,
  ConsumeResponse,
  ConsumerListResponse,
  DeclareQueueResponse,
  DeleteConsumerResponse,
  DeleteQueueResponse,
  ErrorResponse,
  HealthResponse,
  OverviewResponse,
  QueueDetailResponse,
  QueueInfoResponse,
  QueueListResponse,
  ProduceResponse,
  PurgeResponse,
  RewindResponse,
  DelayedProduceResponse,
  PruneRequest,
  PruneResponse,
  SeekRequest,
  SeekResponse,
  ScheduleListResponse,
  ScheduleRequest,
  ScheduleResponse,
} from "../protocol/api";
import { toBase64 } from "../protocol/base64";
import { BATCH_CONTENT_TYPE, decodeBatch, encodeProduceBatch, type BatchRecord } from "../protocol/binary";
import { ProtocolError } from "../protocol/errors";
import { VQueueClientError, VQueueNetworkError, isAbortError, parseRetryAfter } from "./errors";
import { fromBatchRecord, fromJSONMessage, type AnyClientMessage, type ClientMessage } from "./messages";
import { RETRY_DELAY_MS, RETRY_TIMEOUT_MS, checkRetryOptions, withRetries, type RetryOption } from "./retry";
import { isReplay, produceExtras, toJSONText, type ProduceInput, type ProduceReplay } from "./produce";
import { browseCalls, type BrowseOptions, type BrowseRequest, type BrowseResult } from "./browse";
import {
  sharedCalls,
  type AckClientOptions,
  type AnyLeasedMessage,
  type SharedRequest,
  type LeasedClientMessage,
  type LeaseOptions,
  type NackClientOptions,
} from "./shared";
import { followEvents, waitFinished, type EventsOptions, type FinishedOptions, type OutcomeTarget, type StreamContext } from "./outcomes";
import { subscribe, type SubscribeOptions } from "./subscribe";
import type { ConsumeOptions, ConsumeResult } from "./types";
import { runWorker, type Worker, type WorkerHandlerContext, type WorkerOptions } from "./worker";

export type * from "../protocol/api";
export { MessageDeadError, OutcomeTimeoutError, RateLimitError, VQueueClientError, VQueueNetworkError, isAbortError } from "./errors";
export type { EventsOptions, FinishedOptions, OutcomeTarget } from "./outcomes";
export type { BytesMessage, ClientMessage, ParsedMessage, TextMessage, UnparsedMessage } from "./messages";
export type { JsonValue, ProduceInput, ProduceMessage, ProduceReplay } from "./produce";
export type { SubscribeOptions } from "./subscribe";
export type { ConsumeOptions, ConsumeResult } from "./types";
export type { BrowseOptions, BrowseResult, BrowseStart } from "./browse";
export type { AckClientOptions, LeaseInfo, LeasedClientMessage, LeaseOptions, NackClientOptions } from "./shared";
export type { RetryOption } from "./retry";
export type { Worker, WorkerHandlerContext, WorkerOptions, WorkerStats } from "./worker";

export interface ClientOptions {
  /** The server's URL, with the prefix the API is mounted under, e.g. `http://127.0.0.1:9093`. */
  baseURL: string;
  /** Basic auth (RFC 7617). */
  auth?: { username: string; password: string };
  /** A `fetch` to use instead of the global one (tests, proxies, custom agents). */
  fetch?: typeof globalThis.fetch;
  /**
   * Retries of a failed read (`health`, `queues`, `queue`, `consumers`, `rewind`, `seek`,
   * `declare`), on the errors `retryTimeoutMs` retries. Consume and lease are not idempotent,
   * so they are never retried here (`subscribe` and `worker` reconnect instead).
   * @default 0
   */
  retry?: number;
  /** The first delay between retries, in ms; it doubles (up to 2 s), each drawn between half of it and all of it. @default 200 */
  retryDelay?: number;
  /**
   * How long, in ms, the calls that are safe to repeat keep retrying: `produce` (every produce
   * carries an `Idempotency-Key`, `idempotencyKey` or a random UUID, so the server writes it once
   * however many attempts reach it, within its key window), `ack`, `nack`, `extend` and `commit`
   * (a repeat changes nothing), and `worker()`'s acks, nacks and extends. They retry no answer
   * (the server down or restarting, a timeout), 429, 409 `E_LOCKED` (another process still holds
   * the queue) and 5xx (503 `E_BUSY`, `E_SHUTDOWN`...; not 501, 505, 507 nor `E_CORRUPT`), with
   * backoff and jitter (`retryDelay`), after the server's `Retry-After` when it sends one. Other
   * errors (400, 403, 404, 409 `E_KIND`...) are thrown at once. 0: no retry.
   * @default 20000
   */
  retryTimeoutMs?: number;
  /** A cap on a produce's retries, besides `retryTimeoutMs`. @default none */
  produceRetry?: number;
  /** Request timeout in ms (a long poll gets its own `timeoutMs` on top). @default 30000 */
  timeout?: number;
  /** Headers sent with every request. */
  headers?: Record<string, string>;
}

export interface ProduceOptions {
  signal?: AbortSignal;
  /** Deliver to no consumer before this many ms from now (the answer is then a `DelayedProduceResponse`). */
  delayMs?: number;
  /** Deliver to no consumer before this time: a Date, ms since the epoch or an ISO 8601 date. */
  at?: Date | number | string;
  /** The produce's idempotency key (1 to 255 printable ASCII characters). @default a random UUID per call, so that retries are safe */
  idempotencyKey?: string;
  /** `"binary"` sends a binary batch; `"json"` a JSON body (bytes as base64). @default "binary" when there are bytes, else "json" */
  format?: "json" | "binary";
  /**
   * A partitioned queue only: the key that picks the partition (`Partition-Key`), so every
   * message of one key goes to one partition, in order. The whole call goes to that partition.
   * @default none: with the idempotency key's partition, or any this server writes
   */
  partitionKey?: string;
  /** 0 to 255: shared consumers lease messages of a higher priority first (`Message-Priority`). @default 0 */
  priority?: number;
  /** Deliveries to a shared consumer before the dead-letter queue, instead of the consumer's (`Message-Max-Deliveries`). */
  maxDeliveries?: number;
  /** The wait before a failed delivery comes again, when its nack names none (`Message-Backoff`). */
  backoff?: { type: "fixed" | "exponential"; delayMs: number };
  /** A group: shared consumers lease its messages in order, `groupConcurrency` at a time (`Message-Group`); printable ASCII. */
  group?: string;
}

export interface VQueueClient {
  health(): Promise<HealthResponse>;
  queues(): Promise<QueueListResponse>;
  queue(queue: string): Promise<QueueInfoResponse>;
  consumers(queue: string): Promise<ConsumerListResponse>;
  /** Text as strings, bytes as Uint8Arrays: narrow `data` on `type`. */
  consume(queue: string, consumer: string, options?: ConsumeOptions & { json?: false }): Promise<ConsumeResult>;
  /** Text parsed as JSON, typed `T` (not checked: the queue is trusted to hold `T`s): narrow on `json`. */
  consume<T = unknown>(queue: string, consumer: string, options: ConsumeOptions & { json: true }): Promise<ConsumeResult<T>>;
  /** `json` known at run time only: either kind. */
  consume<T = unknown>(queue: string, consumer: string, options: ConsumeOptions): Promise<ConsumeResult<T> | ConsumeResult>;
  /** Commits everything handed out to `consumer`, or up to `cursor`. Idempotent, so retried (`retryTimeoutMs`). */
  commit(queue: string, consumer: string, cursor?: string, options?: { signal?: AbortSignal } & RetryOption): Promise<CommitResponse>;
  /** Hands out again everything after the committed position. */
  rewind(queue: string, consumer: string, options?: { signal?: AbortSignal }): Promise<RewindResponse>;
  /** Moves the consumer (and saves it there): "earliest", "latest", a cursor, `{ part, seq }` (that message comes next), or `{ time }` (an ISO date or ms). */
  seek(queue: string, consumer: string, to: SeekRequest["to"], options?: { signal?: AbortSignal }): Promise<SeekResponse>;
  /**
   * One message, or an array of them (a batch; a JSON array as one message goes in one: `[[1, 2]]`).
   * Text, bytes, or a JSON value; anything else (a Date, a Map, undefined...) is refused, by
   * the types and with a TypeError, rather than sent changed. Retried through a server restart
   * (`retryTimeoutMs`): its idempotency key makes every attempt one write.
   */
  produce<M>(
    queue: string,
    messages: M & ProduceInput<M>,
    options?: ProduceOptions & { delayMs?: undefined; at?: undefined },
  ): Promise<ProduceResponse & ProduceReplay>;
  /** Delayed (`delayMs` or `at`): kept aside by the server until then, answered with when. */
  produce<M>(queue: string, messages: M & ProduceInput<M>, options: ProduceOptions): Promise<(ProduceResponse | DelayedProduceResponse) & ProduceReplay>;
  /**
   * Declares `queue` partitioned with `partitions` partitions (the admin right): `created` false
   * when it already was so; 409 `E_CONFLICT` when it is declared otherwise or is an ordinary queue.
   */
  declare(queue: string, options: { partitions: number; signal?: AbortSignal }): Promise<DeclareQueueResponse>;
  /** Deletes a consumer's saved position (the admin right; 409 while another process reads it). */
  deleteConsumer(queue: string, consumer: string): Promise<DeleteConsumerResponse>;
  /** Deletes a queue: messages, consumers, files (the admin right; 409 while another process has it open). */
  deleteQueue(queue: string): Promise<DeleteQueueResponse>;
  /** Removes every message; the queue and its consumers stay, at the new start (the admin right; 409 as `deleteQueue`). */
  purge(queue: string): Promise<PurgeResponse>;
  /**
   * Sets schedule `name` of `queue` (created, or updated in place): exactly one of `cron` (in
   * `tz`, UTC by default) and `everyMs`; `message` (bytes, a string, or any JSON value) is what
   * each firing produces, by default `{ schedule, tick, at }`. Fired exactly once per tick by
   * whichever server holds the queue's writer.
   */
  schedule(queue: string, name: string, schedule: Omit<ScheduleRequest, "encoding">, options?: { signal?: AbortSignal }): Promise<ScheduleResponse>;
  /** The queue's schedules, with their last and next firing. */
  schedules(queue: string): Promise<ScheduleListResponse>;
  /** Removes schedule `name` of `queue`: false when there was none. */
  unschedule(queue: string, name: string): Promise<boolean>;
  /** Applies retention now (needs the admin right): the server's limits for the queue, or these. Answers what was deleted. */
  prune(queue: string, limits?: PruneRequest, options?: { signal?: AbortSignal }): Promise<PruneResponse>;
  /** Messages as they come, long-polling in a loop; see `SubscribeOptions`. */
  subscribe(queue: string, consumer: string, options?: SubscribeOptions & { json?: false }): AsyncGenerator<ClientMessage, void, undefined>;
  subscribe<T = unknown>(queue: string, consumer: string, options: SubscribeOptions & { json: true }): AsyncGenerator<ClientMessage<T>, void, undefined>;
  subscribe<T = unknown>(queue: string, consumer: string, options: SubscribeOptions): AsyncGenerator<ClientMessage<T> | ClientMessage, void, undefined>;
  /**
   * Leases up to `max` messages of shared consumer `consumer` (created on first use): each is
   * with this caller until acked, nacked, or its lease runs out (then it goes to another).
   */
  lease(queue: string, consumer: string, options?: LeaseOptions & { json?: false }): Promise<LeasedClientMessage[]>;
  lease<T = unknown>(queue: string, consumer: string, options: LeaseOptions & { json: true }): Promise<LeasedClientMessage<T>[]>;
  lease<T = unknown>(queue: string, consumer: string, options: LeaseOptions): Promise<LeasedClientMessage<T>[] | LeasedClientMessage[]>;
  /**
   * Acknowledges leased messages (answered once durable); refused leases are in `errors`.
   * `results`: a result per lease token, carried by its `completed` outcome. Retried (`retryTimeoutMs`).
   */
  ack(queue: string, consumer: string, leases: string | string[], options?: AckClientOptions & RetryOption): Promise<AckResponse>;
  /** A progress update of a leased message (any JSON value, at most 64 KiB as JSON): a `progress` outcome event. 409 `E_LEASE` unless the lease is held. Retried. */
  progress(queue: string, consumer: string, lease: string, progress: unknown, options?: { signal?: AbortSignal } & RetryOption): Promise<ProgressResponse>;
  /**
   * The outcome events of shared consumer `consumer` (progress, completed, failed, dead) as they
   * come, over server-sent events: a dropped connection is made again after the last event
   * seen. Ends when `signal` aborts or the loop breaks.
   */
  events(queue: string, consumer: string, options?: EventsOptions): AsyncGenerator<OutcomeEventJSON, void, undefined>;
  /**
   * Waits for one message's end: resolves with its `completed` event (`result` is what its
   * handler returned); rejects with `MessageDeadError` (`E_DEAD`) when it went to the dead-letter
   * queue, `OutcomeTimeoutError` (`E_TIMEOUT`) when it did not end within `timeoutMs`.
   * `message`: `{ part, offset, partition? }`, or a produce's answer (its first message).
   */
  finished(queue: string, consumer: string, message: OutcomeTarget, options?: FinishedOptions): Promise<OutcomeEventJSON>;
  /** Gives leased messages back: again after `delayMs`, or to the dead-letter queue (`deadLetter`). Retried (`retryTimeoutMs`). */
  nack(queue: string, consumer: string, leases: string | string[], options?: NackClientOptions & RetryOption): Promise<NackResponse>;
  /** Keeps leases `leaseMs` more from now. Retried (`retryTimeoutMs`). */
  extend(
    queue: string,
    consumer: string,
    leases: string | string[],
    options?: { leaseMs?: number; signal?: AbortSignal } & RetryOption,
  ): Promise<ExtendResponse>;
  /**
   * Shared consumer `consumer` hands nothing out to any worker for `delayMs` (told to slow down,
   * an API's 429 say); running leases go on, lease requests wait. Answers until when. Retried.
   */
  backOff(queue: string, consumer: string, delayMs: number, options?: { signal?: AbortSignal } & RetryOption): Promise<BackOffResponse>;
  /** Moves dead letters of `dlq` back, to `to` or each to its origin queue. */
  redrive(dlq: string, options?: { to?: string; max?: number; signal?: AbortSignal }): Promise<RedriveResponse>;
  /** A page of messages read without any consumer (nothing moves); `next` of the answer is the following page's `from`. */
  browse(queue: string, options?: BrowseOptions & { json?: false }): Promise<BrowseResult>;
  browse<T = unknown>(queue: string, options: BrowseOptions & { json: true }): Promise<BrowseResult<T>>;
  /** Every queue the user may see, from the server's monitor (no part file read); `history`: the last N samples of each. */
  overview(options?: { history?: number; signal?: AbortSignal }): Promise<OverviewResponse>;
  /** One queue: its parts and consumers of both kinds; `history`: the last N samples. */
  queueOverview(queue: string, options?: { history?: number; signal?: AbortSignal }): Promise<QueueDetailResponse>;
  /** Runs `handler` on the messages of shared consumer `consumer`, `concurrency` at once; see `WorkerOptions`. */
  worker(
    queue: string,
    consumer: string,
    handler: (message: LeasedClientMessage, ctx: WorkerHandlerContext) => unknown,
    options?: WorkerOptions & { json?: false },
  ): Worker;
  worker<T = unknown>(
    queue: string,
    consumer: string,
    handler: (message: LeasedClientMessage<T>, ctx: WorkerHandlerContext) => unknown,
    options: WorkerOptions & { json: true },
  ): Worker;
}

export function createClient(options: ClientOptions): VQueueClient {
  checkRetryOptions(options);
  const timeout = options.timeout ?? 30_000;
  const delayMs = options.retryDelay ?? RETRY_DELAY_MS;
  const headers: Record<string, string> = { ...options.headers };
  if (options.auth) headers.authorization = basicAuth(options.auth.username, options.auth.password);
  const base: $Fetch = options.fetch ? createFetch({ fetch: options.fetch }) : ofetch;
  const api: $Fetch = base.create({ baseURL: options.baseURL, headers, retry: 0 });

  /**
   * One request: errors mapped, timeout combined with the caller's signal (ofetch drops `timeout`
   * when a signal is given). `safe`: a call that may be repeated (see `retryTimeoutMs`);
   * `idempotent`: a read, retried `retry` times.
   */
  async function request<T>(path: string, init: FetchOptions<"json" | "arrayBuffer"> & RequestKind & { extraTimeout?: number } = {}): Promise<T> {
    const { idempotent = false, safe = false, maxRetries, extraTimeout = 0, signal, ...rest } = init;
    const once = async (): Promise<T> => {
      const timer = AbortSignal.timeout(timeout + extraTimeout);
      try {
        return (await api(path, { ...rest, signal: signal ? AbortSignal.any([signal, timer]) : timer } as FetchOptions<"json">)) as T;
      } catch (error) {
        throw mapError(error, timer);
      }
    };
    if (safe) return withRetries(once, { timeoutMs: options.retryTimeoutMs ?? RETRY_TIMEOUT_MS, delayMs, maxRetries, signal: signal ?? undefined });
    if (idempotent) return withRetries(once, { timeoutMs: Infinity, delayMs, maxRetries: options.retry ?? 0, signal: signal ?? undefined });
    return once();
  }

  const q = (queue: string) => `/api/v1/queues/${encodeURIComponent(queue)}`;
  const c = (queue: string, consumer: string) => `${q(queue)}/consumers/${encodeURIComponent(consumer)}`;
  const shared = sharedCalls(request as SharedRequest, c, q);
  const reads = browseCalls(request as BrowseRequest, q);
  const stream: StreamContext = {
    fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    url: (path) => `${options.baseURL.replace(/\/+$/, "")}${path}`,
    headers,
    retryDelayMs: delayMs,
  };

  const client: VQueueClient = {
    health: () => request("/health", { idempotent: true }),
    queues: () => request("/api/v1/queues", { idempotent: true }),
    queue: (queue) => request(q(queue), { idempotent: true }),
    consumers: (queue) => request(`${q(queue)}/consumers`, { idempotent: true }),

    // One implementation for the overloads: what `json` makes of the messages is in their types.
    consume: (async (
      queue: string,
      consumer: string,
      opts: ConsumeOptions = {},
    ): Promise<{ messages: AnyClientMessage[]; cursor: string | undefined; missed: number }> => {
      const query: Record<string, string | number> = { max_messages: opts.maxMessages ?? 1, timeout_ms: opts.timeoutMs ?? 0 };
      if (opts.commit) query.commit = opts.commit;
      const timeoutMs = query.timeout_ms as number;
      const common = { query, signal: opts.signal, extraTimeout: timeoutMs };
      if (opts.format === "binary") {
        let cursor: string | undefined;
        let missed = 0;
        let status = 0;
        let type = "";
        const body = await request<ArrayBuffer>(`${c(queue, consumer)}/messages`, {
          ...common,
          headers: { accept: BATCH_CONTENT_TYPE },
          responseType: "arrayBuffer",
          onResponse: ({ response }) => {
            cursor = response.headers.get("x-vq-cursor") ?? undefined;
            missed = Number(response.headers.get("x-vq-missed") ?? 0) || 0;
            status = response.status;
            type = response.headers.get("content-type") ?? "";
          },
        });
        // A server older than VQP1 answers a partitioned queue in JSON.
        if (type.startsWith("application/json")) return fromConsumeJSON(JSON.parse(new TextDecoder().decode(body)) as ConsumeResponse, opts.json ?? false);
        const messages = decodeResponseBatch(new Uint8Array(body), status).map((r) => fromBatchRecord(r, opts.json ?? false));
        return { messages, cursor, missed };
      }
      return fromConsumeJSON(await request<ConsumeResponse>(`${c(queue, consumer)}/messages`, common), opts.json ?? false);
    }) as VQueueClient["consume"],

    commit: (queue, consumer, cursor, opts = {}) =>
      request(`${c(queue, consumer)}/commit`, { method: "POST", safe: opts.retry ?? true, signal: opts.signal, ...(cursor ? { body: { cursor } } : {}) }),

    rewind: (queue, consumer, opts = {}) => request(`${c(queue, consumer)}/rewind`, { method: "POST", idempotent: true, signal: opts.signal }),
    seek: (queue, consumer, to, opts = {}) => request(`${c(queue, consumer)}/seek`, { method: "POST", body: { to }, idempotent: true, signal: opts.signal }),

    // async: a message refused by toJSONText rejects the promise rather than throwing.
    async produce(queue: string, messages: unknown, opts: ProduceOptions = {}) {
      const list: unknown[] = Array.isArray(messages) ? messages : [messages];
      // One key for every attempt of this call: a retry whose first attempt was written writes nothing.
      const extra = produceExtras(opts);
      let replayed = false;
      const send = async (body: unknown, headers: Record<string, string> = {}) => {
        const answer = await request<ProduceResponse>(`${q(queue)}/messages`, {
          method: "POST",
          body: body as BodyInit,
          headers: { ...headers, ...extra.headers },
          query: extra.query,
          signal: opts.signal,
          safe: true,
          maxRetries: options.produceRetry,
          // The last attempt's answer says whether it was a replay.
          onResponse: ({ response }) => void (replayed = isReplay(response, opts.idempotencyKey)),
        });
        return { ...answer, replayed } as never;
      };
      const hasBytes = list.some((m) => m instanceof Uint8Array || m instanceof ArrayBuffer);
      const format = opts.format ?? (hasBytes ? "binary" : "json");
      if (format === "binary") {
        const batch = encodeProduceBatch(
          list.map((m) => (m instanceof ArrayBuffer ? new Uint8Array(m) : m instanceof Uint8Array || typeof m === "string" ? m : toJSONText(m))),
        );
        return send(batch, { "content-type": BATCH_CONTENT_TYPE });
      }
      if (hasBytes) {
        // JSON with bytes: every message goes as base64 of its bytes (text as UTF-8).
        const encoder = new TextEncoder();
        const encoded = list.map((m) =>
          toBase64(m instanceof Uint8Array ? m : m instanceof ArrayBuffer ? new Uint8Array(m) : encoder.encode(typeof m === "string" ? m : toJSONText(m))),
        );
        return send({ messages: encoded, encoding: "base64" });
      }
      // Serialised here, in one pass that also checks every message.
      const body = toJSONText({ messages: list });
      return send(body, { "content-type": "application/json" });
    },

    declare: (queue, opts) => request(q(queue), { method: "PUT", body: { partitions: opts.partitions }, idempotent: true, signal: opts.signal }),
    deleteConsumer: (queue, consumer) => request(c(queue, consumer), { method: "DELETE" }),
    deleteQueue: (queue) => request(q(queue), { method: "DELETE" }),
    purge: (queue) => request(`${q(queue)}/purge`, { method: "POST" }),
    schedule: (queue, name, { message, ...timing }, opts = {}) =>
      request(`${q(queue)}/schedules/${encodeURIComponent(name)}`, {
        method: "PUT",
        body: { ...timing, ...(message instanceof Uint8Array ? { message: toBase64(message), encoding: "base64" } : message === undefined ? {} : { message }) },
        idempotent: true,
        signal: opts.signal,
      }),
    schedules: (queue) => request(`${q(queue)}/schedules`, { idempotent: true }),
    unschedule: (queue, name) =>
      request(`${q(queue)}/schedules/${encodeURIComponent(name)}`, { method: "DELETE" }).then(
        () => true,
        (error: unknown) => {
          if (error instanceof VQueueClientError && error.status === 404 && error.code === "E_NOT_FOUND") return false;
          throw error;
        },
      ),
    prune: (queue, limits, opts = {}) => request(`${q(queue)}/prune`, { method: "POST", signal: opts.signal, ...(limits ? { body: limits } : {}) }),

    subscribe: ((queue: string, consumer: string, opts?: SubscribeOptions) => subscribe(client, queue, consumer, opts)) as VQueueClient["subscribe"],

    lease: (async (queue: string, consumer: string, opts?: LeaseOptions) => (await shared.leaseBatch(queue, consumer, opts)).messages) as VQueueClient["lease"],
    ack: shared.ack,
    progress: shared.progress,
    events: (queue, consumer, opts) => followEvents(stream, `${c(queue, consumer)}/events`, opts),
    finished: (queue, consumer, message, opts) =>
      waitFinished(
        (query, stepMs, signal) => request<OutcomeResponse>(`${c(queue, consumer)}/outcome`, { query, safe: true, signal, extraTimeout: stepMs }),
        message,
        opts,
      ),
    nack: shared.nack,
    extend: shared.extend,
    backOff: shared.backOff,
    redrive: shared.redrive,
    browse: reads.browse as VQueueClient["browse"],
    overview: reads.overview,
    queueOverview: reads.queueOverview,
    worker: ((queue: string, consumer: string, handler: (message: AnyLeasedMessage, ctx: WorkerHandlerContext) => unknown, opts: WorkerOptions = {}) =>
      runWorker(
        {
          leaseBatch: (o) => shared.leaseBatch(queue, consumer, o),
          ack: (leases, results) => shared.ack(queue, consumer, leases, { results, retry: false }),
          progress: (lease, value) => shared.progress(queue, consumer, lease, value, { retry: false }),
          nack: (leases, o) => shared.nack(queue, consumer, leases, { ...o, retry: false }),
          extend: (leases, leaseMs) => shared.extend(queue, consumer, leases, { leaseMs, retry: false }),
          backOff: (delayMs) => shared.backOff(queue, consumer, delayMs, { retry: false }),
        },
        handler,
        opts,
        { queue, consumer, retryTimeoutMs: options.retryTimeoutMs ?? RETRY_TIMEOUT_MS, retryDelayMs: delayMs },
      )) as VQueueClient["worker"],
  };
  return client;
}

// --- Internal helpers ---

/** How a request may be retried: see `request`. */
interface RequestKind {
  safe?: boolean;
  idempotent?: boolean;
  /** A cap on the retries of a `safe` one. */
  maxRetries?: number;
}

function fromConsumeJSON(body: ConsumeResponse, parseJSON: boolean): { messages: AnyClientMessage[]; cursor: string | undefined; missed: number } {
  return { messages: body.messages.map((m) => fromJSONMessage(m, parseJSON)), cursor: body.cursor ?? undefined, missed: body.missed ?? 0 };
}

function basicAuth(username: string, password: string): string {
  // RFC 7617 with charset UTF-8: base64 of the UTF-8 bytes of "user:pass".
  const bytes = new TextEncoder().encode(`${username}:${password}`);
  return `Basic ${toBase64(bytes)}`;
}

/** A binary batch from the server; one the format refuses is the server's fault, told as `E_RESPONSE`. */
function decodeResponseBatch(body: Uint8Array, status: number): BatchRecord[] {
  try {
    return decodeBatch(body, undefined, true);
  } catch (error) {
    if (ProtocolError.isError(error)) throw new VQueueClientError(status, "E_RESPONSE", `Unreadable response: ${error.message}`, { cause: error });
    throw error;
  }
}

/** The error body of an answer read as bytes (a binary request) is JSON all the same. */
function errorBody(data: unknown): ErrorResponse | undefined {
  if (!(data instanceof ArrayBuffer)) return data as ErrorResponse | undefined;
  try {
    return JSON.parse(new TextDecoder().decode(data)) as ErrorResponse;
  } catch {
    return undefined;
  }
}

function mapError(error: unknown, timer: AbortSignal): unknown {
  if (isAbortError(error) && !timer.aborted) return error;
  const fetchError = error as FetchError<ErrorResponse | undefined>;
  const response = fetchError?.response;
  if (response) {
    const body = errorBody(fetchError.data);
    const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
    if (body && typeof body === "object" && "error" in body && body.error?.code) {
      return new VQueueClientError(response.status, body.error.code, body.error.message, { cause: error, retryAfterMs });
    }
    return new VQueueClientError(response.status, "E_RESPONSE", `HTTP ${response.status} ${response.statusText}`.trim(), { cause: error, retryAfterMs });
  }
  if (timer.aborted) return new VQueueNetworkError("The request timed out.", true, { cause: error });
  if (isAbortError(error) || isAbortError(fetchError?.cause)) return fetchError?.cause ?? error;
  const reason = (fetchError?.cause as Error | undefined)?.message ?? (error as Error)?.message ?? String(error);
  return new VQueueNetworkError(`No answer from the server: ${reason}`, false, { cause: error });
}
