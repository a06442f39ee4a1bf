/**
 * What every system of the many-instances bench (issue 15) moves, and how a run reports back.
 * Each message is numbered (its payload starts with its number, then padding to `size` bytes),
 * so a consumer can tell each message apart: a run checks that every message arrived, and counts
 * the ones delivered twice (at least once across a hand-over).
 */
import { encodeProduceBatch } from "../protocol/binary";

export interface Workload {
  messages: number;
  /** Payload bytes. */
  size: number;
  partitions: number;
  /** Messages per produce request / pipeline, and per consume request / XREADGROUP. */
  batch: number;
  /** Concurrent produce loops (each takes the next batch). */
  producers: number;
}

/** One batch, as strings (for Redis) and as the binary produce body (for v-queue's HTTP API). */
export interface Batch {
  payloads: string[];
  body: Buffer;
}

/** One run: seconds to produce everything, seconds to consume everything (or why not). */
export interface Measured {
  produce: number;
  consume?: number;
  /** Why consume has no figure (what failed), when it has none. */
  consumeFailed?: string;
  /** Messages delivered more than once. */
  duplicates: number;
  /** Requests answered 409/503 (a hand-over, a fenced write) and sent again, by operation and "<status> <code>". */
  retried: Record<"produce" | "consume", Record<string, number>>;
  /** Messages consumed through each instance, when there are several. */
  split?: number[];
  /** When each instance's first message came (ms after the consume started). */
  firstMs?: number[];
  /** Consume requests answered with no message (waiting for a partition or a hand-over). */
  emptyPolls?: number;
  /** Consume requests answered with messages (each of up to `batch`). */
  fullPolls?: number;
  /** CPU time the servers used (all instances together, ms) while producing and while consuming; v-queue only. */
  serverCpuMs?: { produce: number; consume?: number };
}

export interface System {
  label: string;
  run(round: number, batches: Batch[]): Promise<Measured>;
  close(): Promise<void>;
}

export function noRetries(): Measured["retried"] {
  return { produce: {}, consume: {} };
}

/** The batches of one round, made before any clock starts. */
export function makeBatches(work: Workload): Batch[] {
  const out: Batch[] = [];
  for (let first = 0; first < work.messages; first += work.batch) {
    const payloads = Array.from({ length: Math.min(work.batch, work.messages - first) }, (_, i) => `${first + i} `.padEnd(work.size, "x"));
    out.push({ payloads, body: Buffer.from(encodeProduceBatch(payloads)) });
  }
  return out;
}

/** The number a payload starts with (its digits up to the first space). */
export function payloadId(payload: string | Uint8Array): number {
  let n = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = typeof payload === "string" ? payload.charCodeAt(i) : payload[i]!;
    if (c < 48 || c > 57) break;
    n = n * 10 + c - 48;
  }
  return n;
}
