/**
 * How a bad option is told, for every layer (the engine's options, the HTTP runtime's, the
 * server's config schema, the Nitro module): one wording, `Invalid <name> <value>: <what is
 * allowed>.`, and one error, `VQueueError` with code `E_OPTION`.
 */
import { VQueueError } from "./errors";

/** A check of one option: the sentence saying what is wrong with `value` (given as `name`), or undefined. */
export type Check = (value: unknown, name: string) => string | undefined;

/** A value as it reads in a message (`NaN`, `undefined` and `Infinity` too, which JSON drops). */
export const showValue = (value: unknown): string =>
  value === undefined ? "undefined" : typeof value === "number" && !Number.isFinite(value) ? String(value) : JSON.stringify(value);

/** `a, b or c`. */
export const orList = (values: readonly string[]): string => (values.length < 2 ? values.join("") : `${values.slice(0, -1).join(", ")} or ${values.at(-1)}`);

/** One of `values` (strings). */
export const oneOf =
  (values: readonly string[]): Check =>
  (value, name) =>
    values.includes(value as string) ? undefined : `Invalid ${name} ${showValue(value)}: use ${orList(values.map((v) => JSON.stringify(v)))}.`;

/** An integer from `min` to `max` (no upper bound by default). */
export const integer =
  (min: number, max = Number.MAX_SAFE_INTEGER): Check =>
  (value, name) =>
    Number.isInteger(value) && (value as number) >= min && (value as number) <= max
      ? undefined
      : `Invalid ${name} ${showValue(value)}: use an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? " up" : ` to ${max}`}.`;

export const boolean: Check = (value, name) => (typeof value === "boolean" ? undefined : `Invalid ${name} ${showValue(value)}: use true or false.`);

/** The error of a bad option; `message` says what was wrong and what is allowed. */
export function optionError(message: string, options?: { cause?: unknown }): VQueueError {
  return new VQueueError("E_OPTION", message, options);
}

/** Throws `E_OPTION` when `check` finds a problem with `value`. */
export function checkOption(name: string, value: unknown, check: Check): void {
  const problem = check(value, name);
  if (problem !== undefined) throw optionError(problem);
}

/** Throws one `E_OPTION` for every problem found (undefined entries are checks that passed). */
export function throwProblems(problems: readonly (string | undefined)[]): void {
  const found = problems.filter((p) => p !== undefined);
  if (found.length === 0) return;
  throw optionError(found.length === 1 ? found[0]! : `${found.length} problems in the options:\n${found.map((p) => `  - ${p}`).join("\n")}`);
}
