import { VQueueError } from "./errors";

const NAME_RE = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The crate's flat layout puts every file of every queue side by side: `Q_info_queue`,
 * `Q-<part>/`, `Q_queue.lock`, `Q_info_pop_C`, `Q_info_pop_C.lock`. These rules make the
 * mapping from (queue, consumer, part, kind of file) to a path one-to-one:
 * - a queue name never holds `_info_` nor ends in `_info`, so the first `_info_` of a file
 *   name is where its queue name ends (`Q_info_pop_C` cannot be read as another queue's file);
 * - a consumer name never ends in `.lock`, so a position file is never another's lock file,
 *   and never holds `_info_`, so the last `_info_pop_` of a position file is where the consumer
 *   name starts: even a queue the crate made under a name these rules refuse keeps its files;
 * - `Q-<part>` ends in digits and holds no `_info_`: it is no info or lock file.
 */
export const NAME_RULE = "1 to 128 characters from A-Z a-z 0-9 . _ -, not '.' and without '..'";
export const QUEUE_NAME_RULE = `${NAME_RULE}; a queue name may not contain "_info_" nor end in "_info" (those spell the queue's own files)`;
export const CONSUMER_NAME_RULE = `${NAME_RULE}; a consumer name may not contain "_info_" nor end in ".lock" (those spell other files), and queue and consumer names together stay within ${255 - 15} characters (one file name)`;

/** Longest file name on common file systems; `Q_info_pop_C.lock` must fit. */
const MAX_FILE_NAME = 255;
const POP_LOCK_EXTRA = "_info_pop_".length + ".lock".length;

function isSafeName(name: unknown): name is string {
  return typeof name === "string" && NAME_RE.test(name) && name !== "." && !name.includes("..");
}

/**
 * True for a name that is safe as a file name and inside the `;`-separated info lines.
 * `..` is refused anywhere, not only alone: storage backends that map paths to keys
 * (unstorage) refuse `..` segments, and such names are never needed.
 */
export function isValidQueueName(name: unknown): name is string {
  return isSafeName(name) && !name.includes("_info_") && !name.endsWith("_info");
}

/** True for a consumer name that is safe and spells no lock file; `queue` also checks the pair's file name length. */
export function isValidConsumerName(name: unknown, queue?: string): name is string {
  if (!isSafeName(name) || name.endsWith(".lock") || name.includes("_info_")) return false;
  return queue === undefined || queue.length + name.length + POP_LOCK_EXTRA <= MAX_FILE_NAME;
}

/** `isValidQueueName` or `isValidConsumerName`, by kind. */
export function isValidName(name: unknown, what: "queue" | "consumer" = "queue"): name is string {
  return what === "queue" ? isValidQueueName(name) : isValidConsumerName(name);
}

/** The rule for a kind of name, in words. */
export function nameRule(what: "queue" | "consumer"): string {
  return what === "queue" ? QUEUE_NAME_RULE : CONSUMER_NAME_RULE;
}

/**
 * Throws `E_NAME` for a queue or consumer name that would break the crate's readers
 * (docs/format.md#where-the-crate-027-goes-wrong, fault 4), escape the data directory, or spell another file's path.
 * For a consumer, pass its `queue` to check the length of their shared file name.
 */
export function assertName(name: unknown, what: "queue" | "consumer", queue?: string): asserts name is string {
  const valid = what === "queue" ? isValidQueueName(name) : isValidConsumerName(name, queue);
  if (!valid) {
    throw new VQueueError("E_NAME", `Invalid ${what} name ${safeQuote(name)}: use ${nameRule(what)}.`);
  }
}

function safeQuote(value: unknown): string {
  if (typeof value !== "string") return `(${typeof value})`;
  const shown = value.length > 64 ? `${value.slice(0, 64)}…` : value;
  return JSON.stringify(shown);
}
