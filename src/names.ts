import { VQueueError } from "./errors";

const NAME_RE = /^[A-Za-z0-9._-]{1,128}$/;

/** The rule, in words, for error messages and docs. */
export const NAME_RULE = "1 to 128 characters from A-Z a-z 0-9 . _ -, not '.' and without '..'";

/**
 * True for a name that is safe as a file name and inside the `;`-separated info lines.
 * `..` is refused anywhere, not only alone: storage backends that map paths to keys
 * (unstorage) refuse `..` segments, and such names are never needed.
 */
export function isValidName(name: unknown): name is string {
  return typeof name === "string" && NAME_RE.test(name) && name !== "." && !name.includes("..");
}

/**
 * Throws `E_NAME` for a queue or consumer name that would break the crate's readers
 * (FORMAT.md, bug 4) or escape the data directory.
 */
export function assertName(name: unknown, what: "queue" | "consumer"): asserts name is string {
  if (!isValidName(name)) {
    throw new VQueueError("E_NAME", `Invalid ${what} name ${safeQuote(name)}: use ${NAME_RULE}.`);
  }
}

function safeQuote(value: unknown): string {
  if (typeof value !== "string") return `(${typeof value})`;
  const shown = value.length > 64 ? `${value.slice(0, 64)}…` : value;
  return JSON.stringify(shown);
}
