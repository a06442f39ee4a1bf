import type {
  AckResponse,
  BackOffResponse,
  ExtendResponse,
  LeasedMessageJSON,
  LeaseResponse,
  NackResponse,
  ProgressResponse,
  RedriveResponse,
} from "../protocol/api";
import { BATCH_CONTENT_TYPE, decodeLeases, leaseToken, type LeaseRecord } from "../protocol/binary";
import { ProtocolError } from "../protocol/errors";
import { VQueueClientError } from "./errors";
import type { RetryOption } from "./retry";
import { fromJSONMessage, textOrJSON, type ClientMessage } from "./messages";

/** What a leased message carries beside its body: how to ack it, and how often it came. */
export interface LeaseInfo {
  /** The lease token to `ack`, `nack` or `extend` it with. */
  lease: string;
  /** Times it was handed out, this one included (kept across server restarts). */
  deliveries: number;
  /** When the lease runs out, ms since the epoch on the server's clock. */
  leaseUntil: number;
}

/** A leased message: a `ClientMessage` (no `cursor`: shared consumers ack each message) with its lease. */
export type LeasedClientMessage<T = never> = ClientMessage<T> extends infer M ? (M extends unknown ? Omit<M, "cursor"> & LeaseInfo : never) : never;

/** Either kind, for the client's internals. */
export type AnyLeasedMessage = LeasedClientMessage | LeasedClientMessage<unknown>;

export interface LeaseOptions {
  /** Most messages to lease. @default 100 */
  max?: number;
  /** How long the leases run. @default the server's (`shared.leaseMs`, 30000 unless configured) */
  leaseMs?: number;
  /** Wait up to this long for a first message (long poll; at most the server's `limits.maxTimeoutMs`). @default 0 */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Parse text messages as JSON (as `consume` does). @default false */
  json?: boolean;
}

export interface AckClientOptions {
  /** A result per lease token (any JSON value, at most 64 KiB as JSON): the `completed` outcome carries it (`events`, `finished`). */
  results?: Record<string, unknown>;
  signal?: AbortSignal;
}

export interface NackClientOptions {
  /** They come again after this long. @default their backoff (produce option), else the consumer's, else `defaultDelayMs` */
  delayMs?: number;
  /** Without `delayMs`: the wait when neither the message nor the consumer has a backoff. @default 0 */
  defaultDelayMs?: number;
  /** Why they failed: kept with a dead letter. */
  error?: string;
  /** Send them to the dead-letter queue now. */
  deadLetter?: boolean;
  /** Nobody worked on them (a worker stopping): this delivery is not counted, and never dead-letters them. */
  release?: boolean;
  signal?: AbortSignal;
}

/** A lease answer: the messages, and how long their leases run (by the server's clock, so no clock is compared). */
export interface LeaseBatch {
  messages: AnyLeasedMessage[];
  /** `leaseUntil - now` on the server when it answered. */
  leaseMs: number;
}

export type SharedRequest = <T>(path: string, init: Record<string, unknown>) => Promise<T>;

/** The low-level calls of shared consumers, on the client's `request`; `c` makes a consumer's path. */
export function sharedCalls(request: SharedRequest, c: (queue: string, consumer: string) => string, q: (queue: string) => string) {
  const leases = (list: string | string[]) => (typeof list === "string" ? [list] : list);
  return {
    /** A lease request, always in the binary framing (smaller and faster to read than JSON). */
    async leaseBatch(queue: string, consumer: string, opts: LeaseOptions = {}): Promise<LeaseBatch> {
      const body: Record<string, number> = { max: opts.max ?? 100 };
      if (opts.leaseMs !== undefined) body.leaseMs = opts.leaseMs;
      if (opts.timeoutMs) body.timeoutMs = opts.timeoutMs;
      let status = 0;
      let type = "";
      const raw = await request<ArrayBuffer>(`${c(queue, consumer)}/lease`, {
        method: "POST",
        body,
        headers: { accept: BATCH_CONTENT_TYPE },
        responseType: "arrayBuffer",
        signal: opts.signal,
        extraTimeout: opts.timeoutMs ?? 0,
        onResponse: ({ response }: { response: Response }) => void ((status = response.status), (type = response.headers.get("content-type") ?? "")),
      });
      const json = opts.json ?? false;
      // Servers before VQM1 answered a partitioned queue's leases in JSON.
      if (type.startsWith("application/json")) {
        const answer = JSON.parse(new TextDecoder().decode(raw)) as LeaseResponse;
        return {
          messages: answer.messages.map((m) => fromLeaseJSON(m, json)),
          leaseMs: answer.messages.length > 0 ? answer.messages[0]!.leaseUntil - answer.now : 0,
        };
      }
      const { now, records } = decodeLeaseAnswer(new Uint8Array(raw), status);
      return { messages: records.map((r) => fromLeaseRecord(r, json)), leaseMs: records.length > 0 ? records[0]!.leaseUntil - now : 0 };
    },
    // Safe to repeat, so retried (the client's `retryTimeoutMs`); `retry: false` from the worker, which retries them itself.
    ack: (queue: string, consumer: string, list: string | string[], opts: AckClientOptions & RetryOption = {}) =>
      request<AckResponse>(`${c(queue, consumer)}/ack`, {
        method: "POST",
        body: { leases: leases(list), ...(opts.results === undefined ? {} : { results: opts.results }) },
        safe: opts.retry ?? true,
        signal: opts.signal,
      }),
    // A repeat is one more progress event, harmless: retried.
    progress: (queue: string, consumer: string, lease: string, progress: unknown, opts: { signal?: AbortSignal } & RetryOption = {}) =>
      request<ProgressResponse>(`${c(queue, consumer)}/progress`, { method: "POST", body: { lease, progress }, safe: opts.retry ?? true, signal: opts.signal }),
    nack: (queue: string, consumer: string, list: string | string[], opts: NackClientOptions & RetryOption = {}) => {
      const { signal, retry = true, ...rest } = opts;
      return request<NackResponse>(`${c(queue, consumer)}/nack`, { method: "POST", body: { leases: leases(list), ...rest }, safe: retry, signal });
    },
    extend: (queue: string, consumer: string, list: string | string[], opts: { leaseMs?: number; signal?: AbortSignal } & RetryOption = {}) =>
      request<ExtendResponse>(`${c(queue, consumer)}/extend`, {
        method: "POST",
        body: { leases: leases(list), leaseMs: opts.leaseMs },
        safe: opts.retry ?? true,
        signal: opts.signal,
      }),
    // A repeat changes nothing (the later end is kept): retried.
    backOff: (queue: string, consumer: string, delayMs: number, opts: { signal?: AbortSignal } & RetryOption = {}) =>
      request<BackOffResponse>(`${c(queue, consumer)}/backoff`, { method: "POST", body: { delayMs }, safe: opts.retry ?? true, signal: opts.signal }),
    redrive: (dlq: string, opts: { to?: string; max?: number; signal?: AbortSignal } = {}) =>
      request<RedriveResponse>(`${q(dlq)}/redrive`, { method: "POST", body: { to: opts.to, max: opts.max }, signal: opts.signal }),
  };
}

/** A leased message as the client gives it (also from the engine's, in a Nitro app). */
export function fromLeaseRecord(record: LeaseRecord, parseJSON: boolean): AnyLeasedMessage {
  const { part, offset, seq, deliveries, leaseUntil, data, partition } = record;
  const lease = leaseToken(record);
  // A partitioned queue's: with its partition, as in a JSON answer.
  if (partition !== undefined) return { partition, ...fromLeaseRecord({ ...record, partition: undefined }, parseJSON), lease } as AnyLeasedMessage;
  // Literals, not spreads: this runs for every message.
  if (typeof data !== "string") return { part, offset, seq, type: "object", data, lease, deliveries, leaseUntil };
  if (!parseJSON) return { part, offset, seq, type: "string", data, lease, deliveries, leaseUntil };
  return { part, offset, seq, ...textOrJSON(data, true), lease, deliveries, leaseUntil } as AnyLeasedMessage;
}

/** A leased message of a JSON lease answer (a partitioned queue's: with its `partition`). */
function fromLeaseJSON(m: LeasedMessageJSON, parseJSON: boolean): AnyLeasedMessage {
  const { lease, deliveries, leaseUntil } = m;
  const { cursor: _, ...message } = fromJSONMessage({ ...m, cursor: "" }, parseJSON);
  return { ...message, lease, deliveries, leaseUntil } as AnyLeasedMessage;
}

/** A lease answer the client cannot read is the server's fault: `E_RESPONSE`. */
function decodeLeaseAnswer(body: Uint8Array, status: number): ReturnType<typeof decodeLeases> {
  try {
    return decodeLeases(body);
  } catch (error) {
    if (ProtocolError.isError(error)) throw new VQueueClientError(status, "E_RESPONSE", `Unreadable response: ${error.message}`, { cause: error });
    throw error;
  }
}
