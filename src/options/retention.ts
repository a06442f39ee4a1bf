import { boolean, integer, showValue, type Check } from "../core/check";

/**
 * How much of a queue to keep (retention/prune.ts). Whole sealed parts are deleted, oldest first,
 * never the part being written; each limit alone can make a part go. No limit: keep all.
 */
export interface RetentionOptions {
  /** Delete a part once its newest message is older than this (known from the part's index). */
  maxAgeMs?: number;
  /** Delete the oldest parts while the queue's parts hold more bytes than this. */
  maxBytes?: number;
  /** Delete the oldest parts while the queue has more parts than this (the current one counts). */
  maxParts?: number;
  /** Delete a part once every consumer of the queue has committed past it (a queue with no consumer keeps all). */
  deleteConsumed?: boolean;
  /** How often the writer's process applies it in the background (and after each new part). @default 60000 */
  intervalMs?: number;
  /** Most parts deleted by one background round (a bounded cost beside pushes). @default 8 */
  maxPartsPerRound?: number;
}

export const RETENTION_DEFAULTS = { intervalMs: 60_000, maxPartsPerRound: 8 } as const;

const RETENTION_KEYS: Record<keyof RetentionOptions, Check> = {
  maxAgeMs: integer(1),
  maxBytes: integer(1),
  maxParts: integer(1),
  deleteConsumed: boolean,
  intervalMs: integer(10, 86_400_000),
  maxPartsPerRound: integer(1, 1_000_000),
};

/** Every problem of a retention object at `name` (the engine's, the server config's and Nitro's one check). */
export function retentionProblems(value: unknown, name = "retention"): string[] {
  if (value === undefined) return [];
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return [
      `Invalid ${name} ${showValue(value)}: expected an object such as { "maxAgeMs": 86400000, "maxBytes": 1e10, "maxParts": 100, "deleteConsumed": true }.`,
    ];
  const problems: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const check = RETENTION_KEYS[key as keyof RetentionOptions];
    if (!check) problems.push(`Unknown key "${name}.${key}": use ${Object.keys(RETENTION_KEYS).join(", ")}.`);
    else if (v !== undefined) {
      const problem = check(v, `${name}.${key}`);
      if (problem) problems.push(problem);
    }
  }
  return problems;
}

/** Whether a retention object asks for any deletion at all. */
export function retains(retention: RetentionOptions | undefined): retention is RetentionOptions {
  return (
    !!retention &&
    (retention.maxAgeMs !== undefined || retention.maxBytes !== undefined || retention.maxParts !== undefined || retention.deleteConsumed === true)
  );
}
