import { MAX_OUTCOME_BYTES } from "../src/format/outcome";
import { toJSONText } from "./produce";
import type { AnyLeasedMessage } from "./shared";

export interface WorkerOptions {
  /** Handlers running at once. @default 8 */
  concurrency?: number;
  /**
   * Messages per lease request; the worker leases again once fewer than half of it wait. By
   * default it adapts: from `concurrency * 4`, doubling (up to 1000) while handlers finish
   * faster than full batches arrive; slow handlers keep it small (others get the messages).
   */
  batch?: number;
  /** How long each lease runs (extended while its handler runs). @default the server's */
  leaseMs?: number;
  /** Once a message has come this many times, a failure sends it to the dead-letter queue. @default the server's `maxDeliveries` decides */
  maxDeliveries?: number;
  /** Delay before a failed message comes again, from its deliveries so far. @default 100 ms doubling, at most 30 s */
  backoff?: (deliveries: number) => number;
  /** Stops the worker as `stop()` does. */
  signal?: AbortSignal;
  /** Parse text messages as JSON (as `consume` does). @default false */
  json?: boolean;
  /** How long each lease request waits on the server when there is nothing. @default 20000 */
  pollTimeoutMs?: number;
  /** Acks are sent together: after this long, once `batch` are waiting, or when nothing runs nor waits. @default 2 */
  ackDelayMs?: number;
  /** Told once the server has acknowledged messages (a 2xx: they never come again), e.g. for metrics. */
  onAck?: (messages: AnyLeasedMessage[]) => void;
  /**
   * Told about a handler's throw (the message is nacked), a lease request that failed (retried),
   * an ack, nack or extend that failed for good (after the client's `retryTimeoutMs`), and the
   * queue not existing yet (the worker waits for it).
   * @default one console.warn line per event: queue, consumer, the message's delivery (of
   * `maxDeliveries`), the handler's message, whether it went to the dead-letter queue; one
   * when the server stops answering and one when it answers again; nothing while the queue
   * does not exist yet
   */
  onError?: (error: unknown, message?: AnyLeasedMessage) => void;
}

type Check = [test: (value: unknown) => boolean, allowed: string];

const integerFrom = (min: number): Check => [(v) => Number.isSafeInteger(v) && (v as number) >= min, `an integer from ${min} up`];
const func: Check = [(v) => typeof v === "function", "a function"];

/** What each option takes (undefined is always fine: the default). */
const CHECKS: { [K in keyof Required<WorkerOptions>]: Check } = {
  concurrency: integerFrom(1),
  batch: integerFrom(1),
  leaseMs: integerFrom(1),
  maxDeliveries: integerFrom(1),
  backoff: [(v) => typeof v === "function", "a function (deliveries) => ms"],
  signal: [
    (v) => typeof v === "object" && v !== null && typeof (v as AbortSignal).aborted === "boolean" && typeof (v as AbortSignal).addEventListener === "function",
    "an AbortSignal",
  ],
  json: [(v) => typeof v === "boolean", "true or false"],
  pollTimeoutMs: integerFrom(0),
  ackDelayMs: [(v) => typeof v === "number" && Number.isFinite(v) && v >= 0, "a number of ms from 0 up"],
  onAck: func,
  onError: func,
};

/** Refuses a worker's bad options when it starts (a TypeError saying which and what it takes), not at the first message that uses one. */
export function checkWorkerOptions(options: WorkerOptions): void {
  if (typeof options !== "object" || options === null) throw new TypeError(`Invalid worker options ${String(options)}: an object.`);
  for (const [name, [test, allowed]] of Object.entries(CHECKS) as [keyof WorkerOptions, Check][]) {
    const value = options[name];
    if (value !== undefined && !test(value)) throw new TypeError(`Invalid worker option ${name}: ${describeValue(value)}; it takes ${allowed}.`);
  }
}

function describeValue(value: unknown): string {
  if (typeof value === "function") return "a function";
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Why `value` cannot be a result or progress value (not a JSON value, or too large), or undefined. `what` names it. */
export function outcomeValueError(value: unknown, what: string): TypeError | undefined {
  let text: string;
  try {
    text = toJSONText(value, what);
  } catch (error) {
    return error as TypeError;
  }
  const bytes = new TextEncoder().encode(text).length;
  if (bytes > MAX_OUTCOME_BYTES) return new TypeError(`${what} is ${bytes} bytes as JSON: the most is ${MAX_OUTCOME_BYTES}.`);
  return undefined;
}
