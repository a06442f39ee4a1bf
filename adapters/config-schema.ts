/**
 * The one schema of the server's configuration (`vqueue.config.*`, env, flags, merged), checked
 * as a whole at start: every problem is reported at once, so a bad setup fails before serving
 * rather than with a 500 on the first request.
 */
import { boolean, integer, oneOf as oneOfCheck, showValue as show, type Check } from "../src/core/check";
import { isValidName } from "../src/core/names";
import { checkCompression, checkDurability, checkIdempotencyWindow, checkMaxDelayed, checkStart } from "../src/options/queue";
import { DEFAULT_LIMITS, limitsProblems, metricsProblems, monitorProblems, queuesProblems } from "../runtime/options";
import { retentionProblems } from "../src/options/retention";
import { sharedSettingsProblems } from "../src/options/shared";
import { checkSchedule, type ScheduleInput } from "../src/writer/schedules";
import { suggest } from "./suggest";
import { ZSTD_CHOICES } from "./zstd-choices";

/** A configuration that cannot be served; `problems` lists each one. */
export class ConfigError extends Error {
  override name = "ConfigError";
  readonly code = "E_CONFIG";
  constructor(
    readonly problems: string[],
    source?: string,
  ) {
    const where = source ? `${source}: ` : "";
    super(
      problems.length === 1
        ? `${where}${problems[0]}`
        : `${where}${problems.length} problems in the configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`,
    );
  }
}

/** Checks `value` at `path`, adding a sentence per problem to `out`. */
type Rule = (value: unknown, path: string, out: string[]) => void;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** A rule from a check shared with the engine and the HTTP runtime (same wording everywhere). */
const rule =
  (check: Check): Rule =>
  (v, path, out) => {
    const problem = check(v, path);
    if (problem !== undefined) out.push(problem);
  };

const oneOf = (values: readonly string[]): Rule => rule(oneOfCheck(values));

const text =
  ({ nonEmpty = false } = {}): Rule =>
  (v, path, out) => {
    if (typeof v !== "string" || (nonEmpty && v.length === 0)) out.push(`Invalid ${path} ${show(v)}: expected a${nonEmpty ? " non-empty" : ""} string.`);
  };

const bool: Rule = rule(boolean);

const int = (min: number, max?: number): Rule => rule(integer(min, max));

/** An object with these keys only; `required` ones must be there. */
const object =
  (shape: Record<string, Rule>, required: string[] = []): Rule =>
  (v, path, out) => {
    if (!isObject(v)) return void out.push(`Invalid ${path || "configuration"} ${show(v)}: expected an object.`);
    const at = (key: string) => (path ? `${path}.${key}` : key);
    for (const key of Object.keys(v)) if (!(key in shape)) out.push(`Unknown key ${show(at(key))}${suggest(key, Object.keys(shape))}.`);
    for (const [key, rule] of Object.entries(shape)) {
      if (v[key] !== undefined) rule(v[key], at(key), out);
      else if (required.includes(key)) out.push(`Missing ${at(key)}.`);
    }
  };

/** `false` (off) or what `rule` takes. */
const orFalse =
  (rule: Rule): Rule =>
  (v, path, out) => {
    if (v !== false) rule(v, path, out);
  };

const arrayOf =
  (rule: Rule): Rule =>
  (v, path, out) => {
    if (!Array.isArray(v)) return void out.push(`Invalid ${path} ${show(v)}: expected a list.`);
    v.forEach((item, i) => rule(item, `${path}[${i}]`, out));
  };

/** A right: true (every queue), false, or a list of queue names. */
const right: Rule = (v, path, out) => {
  if (typeof v === "boolean" || (Array.isArray(v) && v.every((q) => typeof q === "string" && isValidName(q)))) return;
  out.push(`Invalid ${path} ${show(v)}: use true (every queue), false or a list of queue names, e.g. ["orders"].`);
};

const username: Rule = (v, path, out) => {
  if (typeof v !== "string" || v.length === 0 || v.includes(":")) out.push(`Invalid ${path} ${show(v)}: a non-empty string without ':' (RFC 7617).`);
};

const user = object({ username, password: text(), read: right, write: right, admin: right }, ["username", "password"]);

const users: Rule = (v, path, out) => {
  arrayOf(user)(v, path, out);
  if (!Array.isArray(v)) return;
  const seen = new Set<unknown>();
  v.forEach((u: { username?: unknown } | undefined, i) => {
    if (typeof u?.username !== "string") return;
    if (seen.has(u.username)) out.push(`Invalid ${path}[${i}].username ${show(u.username)}: given twice.`);
    seen.add(u.username);
  });
};

const auth = orFalse((v, path, out) => {
  object({ enabled: bool, realm: text(), users }, [])(v, path, out);
  if (isObject(v) && v.enabled === true && !(Array.isArray(v.users) && v.users.length > 0))
    out.push(`Invalid ${path}: enabled without users, nobody could log in.`);
});

// Known keys here; values and how they relate: the HTTP runtime's own check.
const limits: Rule = (v, path, out) => {
  object(Object.fromEntries(Object.keys(DEFAULT_LIMITS).map((key) => [key, () => {}])))(v, path, out);
  if (isObject(v)) out.push(...limitsProblems(Object.fromEntries(Object.entries(v).filter(([key]) => key in DEFAULT_LIMITS)), path));
};

const origin: Rule = (v, path, out) => {
  if (v === "*" || (Array.isArray(v) && v.every((o) => typeof o === "string"))) return;
  out.push(`Invalid ${path} ${show(v)}: use "*" or a list of origins, e.g. ["https://app.example.com"].`);
};

export const LOG_LEVELS = ["error", "warn", "info", "debug", "trace"] as const;

/** The keys of the server's config that apply inside a host app too (the Nitro module's). */
const common = {
  dir: text({ nonEmpty: true }),
  storage: text({ nonEmpty: true }),
  durability: rule(checkDurability),
  compression: rule(checkCompression),
  start: rule(checkStart),
  syncCommits: bool,
  consumerIdleMs: int(0),
  idempotencyWindowMs: rule(checkIdempotencyWindow),
  maxDelayed: rule(checkMaxDelayed),
  auth,
  limits,
  dashboard: bool,
  // The engine's and the runtime's own checks: one wording everywhere.
  retention: (v, path, out) => void out.push(...retentionProblems(v, path)),
  shared: (v, path, out) => void out.push(...sharedSettingsProblems(v, path)),
  queues: (v, path, out) => void out.push(...queuesProblems(v, path)),
  monitor: (v, path, out) => void out.push(...monitorProblems(v, path)),
  metrics: (v, path, out) => void out.push(...metricsProblems(v, path)),
} satisfies Record<string, Rule>;

const { dir, storage, durability, compression, start, syncCommits, ...rest } = common;

/** Every key a config may hold, and what it takes (in this order, the problems are listed). */
const CONFIG_KEYS: Record<string, Rule> = {
  dir,
  storage,
  host: text({ nonEmpty: true }),
  port: int(0, 65535),
  durability,
  compression,
  compressionDictionary: text({ nonEmpty: true }),
  zstd: oneOf(ZSTD_CHOICES),
  start,
  syncCommits,
  maxConsumers: int(1),
  ...rest,
  cors: orFalse(object({ origin, maxAge: int(0) }, ["origin"])),
  logLevel: oneOf(LOG_LEVELS),
};

const config = object(CONFIG_KEYS);

/** The top-level keys a config file may hold (the docs list each). */
export const CONFIG_KEY_NAMES: readonly string[] = Object.keys(CONFIG_KEYS);

/** The problems of one key's value, told as `label`'s (an environment variable's name: `Invalid VQUEUE_PORT "abc"`). */
export function valueProblems(key: keyof typeof CONFIG_KEYS, value: unknown, label: string): string[] {
  const out: string[] = [];
  CONFIG_KEYS[key]!(value, label, out);
  return out;
}

/** The Nitro module's `schedules`: by name, each with its queue and timing (checked by the engine, one wording). */
const schedules: Rule = (v, path, out) => {
  if (!isObject(v))
    return void out.push(`Invalid ${path} ${show(v)}: expected an object of schedules by name, e.g. {"nightly": {"queue": "jobs", "cron": "0 3 * * *"}}.`);
  for (const [name, spec] of Object.entries(v)) {
    const at = `${path}.${name}`;
    object({ queue: text({ nonEmpty: true }), cron: () => {}, tz: () => {}, everyMs: () => {}, message: () => {} }, ["queue"])(spec, at, out);
    if (!isObject(spec)) continue;
    if (typeof spec.queue === "string" && !isValidName(spec.queue)) out.push(`Invalid ${at}.queue ${show(spec.queue)}: not a queue name.`);
    try {
      const { queue: _queue, ...timing } = spec;
      checkSchedule(name, timing as ScheduleInput);
    } catch (error) {
      out.push(`Invalid ${at}: ${(error as Error).message}`);
    }
  }
};

/** The Nitro/Nuxt module's options (`v-queue/nitro`): the server's that apply in an app, and its own. */
const moduleOptions = object({
  ...common,
  // Empty at run time when unset (every key is in the runtime config, so that env variables can set it).
  dir: text(),
  storage: text(),
  name: text({ nonEmpty: true }),
  prefix: text(),
  schedules,
});

/** Every problem of the Nitro module's options, as given in the app's config or at run time; [] when they are good. */
export function moduleOptionProblems(value: unknown): string[] {
  const out: string[] = [];
  moduleOptions(value, "", out);
  return out;
}

/** Every problem of a (merged) configuration; [] when it is good. */
export function configProblems(value: unknown): string[] {
  const out: string[] = [];
  config(value, "", out);
  return out;
}
