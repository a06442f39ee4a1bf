import type { Storage } from "unstorage";
import { VQueueError } from "../../../src/core/errors";

/**
 * What the unstorage driver's pieces share: the storage calls it makes, how paths become keys,
 * how part chunks are keyed, and how stored values become bytes.
 */

export const DRIVER_NAME = "unstorage";

/** The five storage calls the driver makes: an unstorage 1.17 or 2.x `Storage` (or a `prefixStorage`) fits. */
export type UnstorageLike = Pick<Storage, "getItemRaw" | "setItemRaw" | "getKeys" | "removeItem" | "hasItem">;

export interface Context {
  storage: UnstorageLike;
  maxChunkBytes: number;
  keyOf(path: string): string;
}

export interface Chunk {
  start: number;
  /** NaN until read: a listing gives starts only. */
  length: number;
}

export const PAD = 15; // offsets up to 10^15 - 1: keys sort in offset order
export const CHUNK_RE = /~(\d{15})$/;

export function chunkKey(key: string, start: number): string {
  return start === 0 ? key : `${key}~${String(start).padStart(PAD, "0")}`;
}

/** unstorage hands back Buffers, Uint8Arrays, strings or JSON-ified Buffers depending on the backend. */
export function toBytes(value: unknown): Uint8Array | undefined {
  if (value === null || value === undefined) return undefined;
  if (value instanceof Uint8Array) return value;
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  if (typeof value === "string") {
    if (value.startsWith("base64:")) return Uint8Array.from(atob(value.slice(7)), (c) => c.charCodeAt(0));
    return new TextEncoder().encode(value);
  }
  const data = (value as { type?: string; data?: unknown }).data;
  if ((value as { type?: string }).type === "Buffer" && Array.isArray(data)) return Uint8Array.from(data as number[]);
  throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver failed: unexpected value type from storage: ${typeof value}.`);
}

export function copyOf(bytes: Uint8Array | undefined): Uint8Array | undefined {
  return bytes && bytes.slice();
}

export function joinKey(base: string, path: string): string {
  const rel = path.replace(/\//g, ":");
  return base && rel ? `${base}:${rel}` : base || rel;
}

export function parentKey(key: string): string {
  const cut = key.lastIndexOf(":");
  return cut < 0 ? "" : key.slice(0, cut);
}

/**
 * `key`'s raw value for a read-then-write (a renewal of a lock or a registration), read again (up
 * to `tries` more times) while a read took longer than `staleMs`: a pause (SIGSTOP, a starved
 * loop) in the middle of it leaves what it saw stale, and a stamp written over a value written
 * meanwhile would take it from its live owner. A storage always that slow is still answered.
 */
export async function readForRenewal(storage: UnstorageLike, key: string, staleMs: number, tries = 3): Promise<unknown> {
  for (let reread = 0; ; reread++) {
    const at = Date.now();
    const value = await storage.getItemRaw(key);
    if (Date.now() - at <= staleMs || reread >= tries) return value;
  }
}
