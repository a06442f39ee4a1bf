import { integer, showValue, throwProblems, type Check } from "../core/check";
import { isValidQueueName, nameRule } from "../core/names";
import { resolveConsumerOptions, type ConsumerOptions, type ResolvedConsumerOptions } from "./queue";
import { backoffProblems, type Backoff } from "../format/attributes";

/** Options of a shared consumer (consumers/shared/consumer.ts), beside those of every consumer. */
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
  /**
   * Most messages of one group (a produce option) leased at once; each group's oldest ones go
   * first, so with 1 a group's messages are handled one at a time, in order. @default 1
   */
  groupConcurrency?: number;
  /** The dead-letter queue, a normal queue. @default `<queue>.dead` */
  deadLetterQueue?: string;
  /**
   * The wait before a message comes again after a failed delivery (a nack without `delayMs`),
   * unless it was produced with its own: `{ type: "fixed" | "exponential", delayMs }`. @default none: at once
   */
  backoff?: Backoff;
  /**
   * At most `max` messages handed out in any `durationMs`, over all workers (redeliveries count);
   * polls get fewer, or wait for the budget. A partitioned queue splits `max` across its
   * partitions. @default no limit
   */
  limiter?: RateLimit;
  /**
   * At most `max` messages of each group (the produce option `group`) handed out in any
   * `durationMs`, over all workers (redeliveries count); a group whose window is spent waits,
   * the others go on. @default no limit
   */
  groupLimiter?: RateLimit;
}

/** A rate limit: at most `max` hand-outs in any `durationMs` (a sliding window). */
export interface RateLimit {
  max: number;
  durationMs: number;
}

/** Longest lease or delay: what a timer can wait. */
export const MAX_LEASE_MS = 2 ** 31 - 1;

/** A shared consumer's own options: what a server's config may set for every queue or one. */
export type SharedSettings = Pick<
  SharedConsumerOptions,
  "leaseMs" | "maxInFlight" | "maxAckWindow" | "maxDeliveries" | "deadLetterQueue" | "backoff" | "groupConcurrency" | "limiter" | "groupLimiter"
>;

/** Most hand-outs a rate limit may allow per window. */
export const MAX_RATE_LIMIT = 1_000_000;

const RATE_LIMIT_KEYS: Record<keyof RateLimit, Check> = { max: integer(1, MAX_RATE_LIMIT), durationMs: integer(1, MAX_LEASE_MS) };

/** A rate limit: an object with both integers, nothing else. */
const rateLimit: Check = (value, name) => {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `Invalid ${name} ${showValue(value)}: expected an object such as { "max": 100, "durationMs": 1000 } (at most max messages handed out in any durationMs).`;
  const entries = Object.entries(value);
  const unknown = entries.find(([key]) => !(key in RATE_LIMIT_KEYS));
  if (unknown) return `Unknown key "${name}.${unknown[0]}": use max and durationMs.`;
  const problems = (Object.keys(RATE_LIMIT_KEYS) as (keyof RateLimit)[]).map((key) =>
    RATE_LIMIT_KEYS[key]((value as Record<string, unknown>)[key], `${name}.${key}`),
  );
  return problems.filter((p) => p !== undefined).join(" ") || undefined;
};

const SETTING_CHECKS: Record<keyof SharedSettings, Check> = {
  leaseMs: integer(1, MAX_LEASE_MS),
  maxInFlight: integer(1, 1_000_000),
  maxAckWindow: integer(1, 10_000_000),
  maxDeliveries: integer(1, 1_000_000),
  groupConcurrency: integer(1, 1_000_000),
  limiter: rateLimit,
  groupLimiter: rateLimit,
  deadLetterQueue: (value, name) =>
    typeof value === "string" && isValidQueueName(value) ? undefined : `Invalid ${name} ${showValue(value)}: use a queue name (${nameRule("queue")}).`,
  backoff: (value, name) => (value === undefined ? undefined : backoffProblems(value, name).join(" ") || undefined),
};

/** What is wrong with shared-consumer settings at `name` (a server's `shared` or `queues.{q}.shared`); how they relate is checked at open. */
export function sharedSettingsProblems(value: unknown, name = "shared"): string[] {
  if (value === undefined) return [];
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return [`Invalid ${name} ${showValue(value)}: expected an object such as { "leaseMs": 30000, "maxDeliveries": 5 }.`];
  return Object.entries(value).flatMap(([key, v]) => {
    const check = SETTING_CHECKS[key as keyof SharedSettings];
    if (!check) return [`Unknown key "${name}.${key}": use ${Object.keys(SETTING_CHECKS).join(", ")}.`];
    const problem = v === undefined ? undefined : check(v, `${name}.${key}`);
    return problem ? [problem] : [];
  });
}

export interface ResolvedSharedOptions extends ResolvedConsumerOptions {
  leaseMs: number;
  maxInFlight: number;
  maxAckWindow: number;
  maxDeliveries: number;
  groupConcurrency: number;
  deadLetterQueue: string;
  backoff?: Backoff;
  limiter: RateLimit | undefined;
  groupLimiter: RateLimit | undefined;
}

/** Defaults of a shared consumer's own options: the one place they are written. */
export const SHARED_DEFAULTS = { leaseMs: 30_000, maxInFlight: 1000, maxAckWindow: 10_000, maxDeliveries: 5, groupConcurrency: 1 } as const;

export function resolveSharedOptions(queue: string, options: SharedConsumerOptions): ResolvedSharedOptions {
  const { leaseMs, maxInFlight, maxAckWindow, maxDeliveries, groupConcurrency, deadLetterQueue, backoff, limiter, groupLimiter, ...common } = options;
  const base = resolveConsumerOptions(common);
  const resolved: ResolvedSharedOptions = {
    ...base,
    leaseMs: leaseMs ?? SHARED_DEFAULTS.leaseMs,
    maxInFlight: maxInFlight ?? SHARED_DEFAULTS.maxInFlight,
    maxAckWindow: maxAckWindow ?? SHARED_DEFAULTS.maxAckWindow,
    maxDeliveries: maxDeliveries ?? SHARED_DEFAULTS.maxDeliveries,
    groupConcurrency: groupConcurrency ?? SHARED_DEFAULTS.groupConcurrency,
    deadLetterQueue: deadLetterQueue ?? `${queue}.dead`,
    backoff,
    limiter: limiter === undefined ? undefined : { ...limiter },
    groupLimiter: groupLimiter === undefined ? undefined : { ...groupLimiter },
  };
  throwProblems([
    ...Object.entries(SETTING_CHECKS).map(([key, check]) => {
      // The limits as given (none is fine); the others as resolved.
      if (key === "limiter" || key === "groupLimiter") {
        const limit = options[key];
        return limit === undefined ? undefined : check(limit, key);
      }
      return check(resolved[key as keyof SharedSettings], key);
    }),
    resolved.maxAckWindow < resolved.maxInFlight
      ? `Invalid maxAckWindow ${resolved.maxAckWindow}: use at least maxInFlight (${resolved.maxInFlight}).`
      : undefined,
    resolved.deadLetterQueue === queue ? `Invalid deadLetterQueue ${JSON.stringify(resolved.deadLetterQueue)}: use another queue than "${queue}".` : undefined,
  ]);
  return resolved;
}
