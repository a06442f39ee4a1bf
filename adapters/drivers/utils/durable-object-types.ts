/**
 * The Workers APIs the durable-object driver touches, typed structurally (no dependency on
 * @cloudflare/workers-types): a Durable Object namespace binding, and a Durable Object's storage.
 */

/** `ctx.storage` of a Durable Object: its key-value API (both the SQLite and the KV backend have it). */
export interface DurableObjectStorage {
  get<T = unknown>(key: string): Promise<T | undefined>;
  get<T = unknown>(keys: string[]): Promise<Map<string, T>>;
  put(entries: Record<string, unknown>): Promise<void>;
  delete(keys: string[]): Promise<number>;
  list<T = unknown>(options: { prefix?: string; start?: string; end?: string; limit?: number }): Promise<Map<string, T>>;
}

export interface DurableObjectState {
  readonly storage: DurableObjectStorage;
  blockConcurrencyWhile<T>(run: () => Promise<T>): Promise<T>;
}

/** A Durable Object's id, as the namespace gives it. */
export interface DurableObjectId {
  toString(): string;
}

/** A namespace binding (`env.VQUEUE`): ids by name, and a stub per id. */
export interface DurableObjectNamespace<Stub = unknown> {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): Stub;
}
