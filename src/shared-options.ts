import { integer, throwProblems } from "./check";
import { isValidQueueName, nameRule } from "./names";
import { resolveConsumerOptions, type ConsumerOptions, type ResolvedConsumerOptions } from "./options";

/** Options of a shared consumer (shared-consumer.ts), beside those of every consumer. */
export interface SharedConsumerOptions extends ConsumerOptions {
  /** How long a polled message stays with its worker unless `extend`ed (a poll may give its own). @default 30000 */
  leaseMs?: number;
  /** Most messages leased at once, over all workers: polls get fewer, never an error. @default 1000 */
  maxInFlight?: number;
  /**
   * Most messages tracked above the ack floor (the oldest unacknowledged one): leased, waiting
   * to come again, or acknowledged out of order. While the oldest is stuck, polls hand out what
   * lies within this many messages of it, then fewer. @default 10000
   */
  maxAckWindow?: number;
  /** A message delivered this many times and not acknowledged goes to the dead-letter queue. @default 5 */
  maxDeliveries?: number;
  /** The dead-letter queue, a normal queue. @default `<queue>.dead` */
  deadLetterQueue?: string;
}

export interface ResolvedSharedOptions extends ResolvedConsumerOptions {
  leaseMs: number;
  maxInFlight: number;
  maxAckWindow: number;
  maxDeliveries: number;
  deadLetterQueue: string;
}

/** Defaults of a shared consumer's own options: the one place they are written. */
export const SHARED_DEFAULTS = { leaseMs: 30_000, maxInFlight: 1000, maxAckWindow: 10_000, maxDeliveries: 5 } as const;

/** Longest lease or delay: what a timer can wait. */
export const MAX_LEASE_MS = 2 ** 31 - 1;

export function resolveSharedOptions(queue: string, options: SharedConsumerOptions): ResolvedSharedOptions {
  const { leaseMs, maxInFlight, maxAckWindow, maxDeliveries, deadLetterQueue, ...common } = options;
  const base = resolveConsumerOptions(common);
  const resolved: ResolvedSharedOptions = {
    ...base,
    leaseMs: leaseMs ?? SHARED_DEFAULTS.leaseMs,
    maxInFlight: maxInFlight ?? SHARED_DEFAULTS.maxInFlight,
    maxAckWindow: maxAckWindow ?? SHARED_DEFAULTS.maxAckWindow,
    maxDeliveries: maxDeliveries ?? SHARED_DEFAULTS.maxDeliveries,
    deadLetterQueue: deadLetterQueue ?? `${queue}.dead`,
  };
  throwProblems([
    integer(1, MAX_LEASE_MS)(resolved.leaseMs, "leaseMs"),
    integer(1, 1_000_000)(resolved.maxInFlight, "maxInFlight"),
    integer(1, 10_000_000)(resolved.maxAckWindow, "maxAckWindow"),
    resolved.maxAckWindow < resolved.maxInFlight ? `Invalid maxAckWindow ${resolved.maxAckWindow}: use at least maxInFlight (${resolved.maxInFlight}).` : undefined,
    integer(1, 1_000_000)(resolved.maxDeliveries, "maxDeliveries"),
    !isValidQueueName(resolved.deadLetterQueue) || resolved.deadLetterQueue === queue
      ? `Invalid deadLetterQueue ${JSON.stringify(resolved.deadLetterQueue)}: use another queue than "${queue}" (${nameRule("queue")}).`
      : undefined,
  ]);
  return resolved;
}
