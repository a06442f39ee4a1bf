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
  /**
   * What became of the messages handed out (completed with a result, failed, dead-lettered,
   * progress), kept in the consumer's outcome log for `followOutcomes` and `waitForOutcome`
   * (docs/work-queues.md#outcomes): the newest `keep` events of the last `keepMs`. `false`: none kept.
   * @default { keep: 10000, keepMs: 86400000 }
   */
  outcomes?: Partial<OutcomeRetention> | false;
}

/** How many outcome events a consumer keeps, and how long. */
export interface OutcomeRetention {
  keep: number;
  keepMs: number;
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
  "leaseMs" | "maxInFlight" | "maxAckWindow" | "maxDeliveries" | "deadLetterQueue" | "backoff" | "groupConcurrency" | "limiter" | "groupLimiter" | "outcomes"
>;

/** Most hand-outs a rate limit may allow per window. */
export const MAX_RATE_LIMIT = 1_000_000;

const RATE_LIMIT_KEYS: Record<keyof RateLimit, Check> = { max: integer(1, MAX_RATE_LIMIT), durationMs: integer(1, MAX_LEASE_MS) };

const RETENTION_KEYS: Record<keyof OutcomeRetention, Check> = { keep: integer(1, 10_000_000), keepMs: integer(1000, 10 * 365 * 86_400_000) };

/** Outcome retention: false, or an object with either integer. */
const outcomeRetention: Check = (value, name) => {
  if (value === false) return undefined;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return `Invalid ${name} ${showValue(value)}: expected false (keep none) or an object such as { "keep": 10000, "keepMs": 86400000 }.`;
  const unknown = Object.keys(value).find((key) => !(key in RETENTION_KEYS));
  if (unknown) return `Unknown key "${name}.${unknown}": use keep and keepMs.`;
  const problems = (Object.keys(RETENTION_KEYS) as (keyof OutcomeRetention)[]).map((key) => {
    const v = (value as Record<string, unknown>)[key];
    return v === undefined ? undefined : RETENTION_KEYS[key](v, `${name}.${key}`);
  });
  return problems.filter((p) => p !== undefined).join(" ") || undefined;
};

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
  outcomes: outcomeRetention,
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
  /** Undefined: no outcomes kept. */
  outcomes: OutcomeRetention | undefined;
}

/** Defaults of a shared consumer's own options: the one place they are written. */
export const SHARED_DEFAULTS = {
  leaseMs: 30_000,
  maxInFlight: 1000,
  maxAckWindow: 10_000,
  maxDeliveries: 5,
  groupConcurrency: 1,
  outcomes: { keep: 10_000, keepMs: 86_400_000 },
} as const;

export function resolveSharedOptions(queue: string, options: SharedConsumerOptions): ResolvedSharedOptions {
  const { leaseMs, maxInFlight, maxAckWindow, maxDeliveries, groupConcurrency, deadLetterQueue, backoff, limiter, groupLimiter, outcomes, ...common } = options;
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
    outcomes: outcomes === false ? undefined : { ...SHARED_DEFAULTS.outcomes, ...outcomes },
  };
  throwProblems([
    ...Object.entries(SETTING_CHECKS).map(([key, check]) => {
      // The limits as given (none is fine), and the outcomes' retention; the others as resolved.
      if (key === "limiter" || key === "groupLimiter" || key === "outcomes") {
        const given = options[key];
        return given === undefined ? undefined : check(given, key);
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
