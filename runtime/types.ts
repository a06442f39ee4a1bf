/**
 * The types runtime/'s modules share (here, so that none imports another for them): the options
 * that auth and logging read, and the samples the monitor (monitor.ts) hands to the dashboard,
 * `/metrics` and `stat --watch`.
 */
import type { ConsumerPosition } from "../src/format/position";
import type { SharedStats } from "../src/consumers/types";

/** One user of the HTTP API (Basic auth, RFC 7617). */
export interface AuthUser {
  username: string;
  password: string;
  /**
   * May consume, commit, seek and inspect: `true` for every queue, or a list of queue names.
   * @default true
   */
  read?: boolean | string[];
  /**
   * May produce (and so create queues): `true` for every queue, or a list of queue names.
   * @default true
   */
  write?: boolean | string[];
  /**
   * May purge and delete queues, delete consumers and prune: `true` for every queue, or a list of queue names.
   * @default true when `read` and `write` are both `true` (as by default), else false: a user
   * limited in reading or writing is not given the power to delete by omission.
   */
  admin?: boolean | string[];
}

export interface ResolvedAuth {
  realm: string;
  users: Required<AuthUser>[];
}

/** Where the app logs: faults and problems (`error`, `warn`); requests too with `info`/`debug`. */
export interface QueueAppLogger {
  error(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  info?(...args: unknown[]): void;
  debug?(...args: unknown[]): void;
}

/**
 * The host process's standard series (`process_*`), given by a hook of the app options: the
 * runtime is host-neutral, so the Node server and the Nitro adapter measure them (adapters/).
 * Leave out what the host cannot tell.
 */
export interface ProcessStats {
  openFds?: number;
  maxFds?: number;
  residentMemoryBytes?: number;
  cpuSecondsTotal?: number;
  startTimeSeconds?: number;
}

export interface SharedSample {
  /** Leases running now (held here); pending deliveries from its files when another process holds it. */
  inFlight: number;
  /** Re-deliveries this server made since it started (a counter). */
  redelivered: number;
  /** Messages moved to its dead-letter queue since it was created (kept in its files). */
  deadLettered: number;
  oldestUnacked: { part: number; offset: number; seq: number; deliveries?: number } | null;
  /** Held here and handing nothing out: backing off, or its rate limit's window spent. */
  limited?: boolean;
}

export interface ConsumerSample extends ConsumerPosition {
  name: string;
  kind: "ordered" | "shared";
  lag: number;
  lagBytes: number;
  consumedTotal: number;
  consumedBytesTotal: number;
  /** Messages per second over the last few samples. */
  rate: number;
  /** Last time its position moved or this server handed it messages (ms since the epoch). */
  lastSeen: number | null;
  shared?: SharedSample;
}

export interface QueueSample {
  name: string;
  messages: number;
  bytes: number;
  parts: number;
  currentPart: number;
  producedTotal: number;
  producedBytesTotal: number;
  produceRate: number;
  consumeRate: number;
  consumedTotal: number;
  maxLag: number;
  maxLagConsumer: string | null;
  consumers: ConsumerSample[];
  /** A partitioned queue's row (partitioned-samples.ts): its partition count; the rest is summed over its partitions. */
  partitions?: number;
  /** A partition's row: whose, and which. */
  partitionOf?: { queue: string; partition: number; partitions: number };
}

export interface MonitorSnapshot {
  at: number;
  sampleMs: number;
  startedAt: number;
  /** By name. */
  queues: QueueSample[];
  /**
   * Only while the first sample after a start runs (`monitor.firstAnswerMs`): the queues listed
   * and not read yet (a partitioned queue once, until all its partitions are read); they are
   * absent from `queues`, whose figures are whole (none is guessed).
   */
  pending?: string[];
}

/** A consumer held open by this server, as the monitor sees it. */
export interface HeldConsumer {
  lastUsed: number;
  /** Its saved position (a shared one's ack floor), from memory. */
  position: ConsumerPosition;
  shared: SharedStats | undefined;
}
