import type { JsonValue } from "../src/format/message";

export type { JsonValue };

/** One message `produce` takes: text, bytes, or a JSON value (sent as its JSON text). */
export type ProduceMessage = string | Uint8Array | ArrayBuffer | JsonValue;

/**
 * What `produce` checks its argument against: `M` itself when it is a message or an array of
 * messages (a batch), with `never` at each place that is not text, bytes or JSON. Generic so
 * that interfaces pass (they have no index signature, so they are no `JsonValue`), while a
 * Date, a Map, a function, undefined, a bigint, or bytes inside JSON do not: JSON would send
 * them changed (as a string, `{}`, nothing or null) or not at all.
 */
export type ProduceInput<M> = M extends readonly unknown[] ? { [I in keyof M]: MessageInput<M[I]> } : MessageInput<M>;

type MessageInput<T> = T extends Uint8Array | ArrayBuffer ? T : JsonInput<T>;

type JsonInput<T> = T extends JsonValue
  ? T
  : T extends bigint | symbol | undefined | ((...args: never[]) => unknown)
    ? never
    : T extends readonly unknown[]
      ? { [I in keyof T]: JsonInput<T[I]> }
      : T extends object
        ? { [K in keyof T]: T[K] extends undefined ? T[K] : JsonInput<T[K]> }
        : never;

/**
 * The JSON text of a message, refusing with a TypeError what the types refuse (and what they
 * cannot see: a non-plain object, a number that is not finite) instead of sending it changed.
 */
export function toJSONText(value: unknown, subject?: string): string {
  return JSON.stringify(value, subject === undefined ? messageReplacer : strictReplacer(`${subject} must be a JSON value`));
}

const messageReplacer = strictReplacer("A message must be text, bytes or a JSON value");

/** A replacer refusing what is not a JSON value: "`rule`, not <what it is>". */
function strictReplacer(rule: string) {
  return function (this: unknown, key: string, value: unknown): unknown {
    // `value` is after toJSON (a Date is a string by then): look at the original.
    const original = (this as Record<string, unknown>)[key];
    const refuse = (what: string) => {
      const where = key !== "" && !Array.isArray(this) ? ` (at "${key}")` : "";
      throw new TypeError(`${rule}, not ${what}${where}.`);
    };
    switch (typeof original) {
      case "function":
      case "symbol":
      case "bigint":
        return refuse(`a ${typeof original}`);
      case "undefined":
        // A missing property is fine; undefined in an array would go as null, alone as nothing.
        if (key === "" || Array.isArray(this)) refuse("undefined");
        return value;
      case "number":
        if (!Number.isFinite(original)) refuse(String(original));
        return value;
      case "object":
        if (original !== null && !Array.isArray(original) && !isPlainObject(original)) refuse(`a ${original.constructor?.name ?? "non-plain object"}`);
        return value;
    }
    return value;
  };
}

/** An object literal (or `Object.create(null)`), from any realm: not a Date, Map, class instance... */
function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** What a produce's options add to its request: the idempotency key (given, or a fresh UUID), the partition key and the delay. */
export function produceExtras(options: {
  delayMs?: number;
  at?: Date | number | string;
  idempotencyKey?: string;
  partitionKey?: string;
  priority?: number;
  maxDeliveries?: number;
  backoff?: { type: string; delayMs: number };
  group?: string;
}): {
  headers: Record<string, string>;
  query: Record<string, string | number>;
} {
  const key = options.idempotencyKey ?? globalThis.crypto.randomUUID();
  if (typeof key !== "string" || !/^[\x20-\x7e]{1,255}$/.test(key))
    throw new TypeError(`Invalid idempotencyKey ${JSON.stringify(key)}: use 1 to 255 printable ASCII characters.`);
  const query: Record<string, string | number> = {};
  // In the query, not a header: a key may be any text (a header is ASCII only).
  if (options.partitionKey !== undefined) {
    if (typeof options.partitionKey !== "string" || options.partitionKey.length === 0)
      throw new TypeError(`Invalid partitionKey ${JSON.stringify(options.partitionKey)}: a non-empty string.`);
    query.partitionKey = options.partitionKey;
  }
  if (options.delayMs !== undefined) query.delayMs = options.delayMs;
  if (options.at !== undefined) query.at = options.at instanceof Date ? options.at.toISOString() : options.at;
  // The message's attributes as headers: the server checks them (a 400 says what is allowed).
  const headers: Record<string, string> = { "idempotency-key": key };
  if (options.priority !== undefined) headers["message-priority"] = String(options.priority);
  if (options.maxDeliveries !== undefined) headers["message-max-deliveries"] = String(options.maxDeliveries);
  if (options.backoff !== undefined) headers["message-backoff"] = `${options.backoff.type}:${options.backoff.delayMs}`;
  if (options.group !== undefined) headers["message-group"] = options.group;
  return { headers, query };
}

/** What the client adds to a produce's answer. */
export interface ProduceReplay {
  /**
   * True when the server had already accepted this `idempotencyKey` (within its key window) and
   * wrote nothing: the answer is the first one's again. False with a key of the client's own
   * (none given): a retry answered so found this call's own earlier attempt, which was written.
   */
  replayed: boolean;
}

/** Whether `response` answers a produce with the first answer again (`Idempotency-Replayed: true`) under the caller's own key. */
export function isReplay(response: Response, callerKey: string | undefined): boolean {
  return callerKey !== undefined && response.headers.get("idempotency-replayed") === "true";
}
