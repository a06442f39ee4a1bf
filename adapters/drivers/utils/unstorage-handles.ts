import type { LogFile, RecordFile } from "../../../src/core/driver";
import { VQueueError } from "../../../src/core/errors";
import { CHUNK_RE, DRIVER_NAME, PAD, chunkKey, parentKey, toBytes, type Chunk, type Context } from "./unstorage-keys";

/**
 * A part's log: chunk starts and lengths as far as known, and the last chunk fetched. Chunks
 * are immutable once written, except by `truncate` (a torn tail, crash recovery). A reader learns about appends by
 * probing the key right after the last chunk it knows, and re-lists on a miss.
 */
export function createLogHandle(ctx: Context, key: string, known: Chunk[] | undefined): LogFile {
  const { storage, maxChunkBytes } = ctx;
  let chunks = known;
  let cache: { start: number; data: Uint8Array } | undefined;

  const relist = async (): Promise<Chunk[]> => {
    const starts = [0];
    for (const k of await storage.getKeys(parentKey(key))) {
      if (!k.startsWith(`${key}~`)) continue;
      const match = CHUNK_RE.exec(k);
      if (match && k.length === key.length + 1 + PAD) starts.push(Number(match[1]));
    }
    starts.sort((a, b) => a - b);
    chunks = starts.map((start, i) => ({ start, length: i + 1 < starts.length ? starts[i + 1]! - start : Number.NaN }));
    if (cache && !chunks.some((c) => c.start === cache!.start && (Number.isNaN(c.length) || c.length === cache!.data.length))) cache = undefined;
    return chunks;
  };
  const fetchChunk = async (chunk: Chunk): Promise<Uint8Array | undefined> => {
    if (cache?.start === chunk.start && (Number.isNaN(chunk.length) || cache.data.length === chunk.length)) {
      chunk.length = cache.data.length; // a chunk just relisted learns its length from the cache too
      return cache.data;
    }
    const data = toBytes(await storage.getItemRaw(chunkKey(key, chunk.start)));
    if (!data) return undefined;
    chunk.length = data.length;
    cache = { start: chunk.start, data };
    return data;
  };
  /** Makes every chunk length known (only the last can be unknown); returns the end. */
  const settle = async (list: Chunk[]): Promise<number> => {
    const last = list.at(-1)!;
    if (Number.isNaN(last.length) && !(await fetchChunk(last))) last.length = 0;
    return last.start + last.length;
  };
  /** Learns about one more chunk after the known end; false when there is none. */
  const extend = async (list: Chunk[]): Promise<boolean> => {
    const end = await settle(list);
    const last = list.at(-1)!;
    if (last.length === 0) {
      // Only chunk 0 can be empty: the first append replaces it.
      cache = undefined;
      return Boolean((await fetchChunk(last))?.length);
    }
    const data = toBytes(await storage.getItemRaw(chunkKey(key, end)));
    if (!data || data.length === 0) return false;
    list.push({ start: end, length: data.length });
    cache = { start: end, data };
    return true;
  };
  const append = async (list: Chunk[], position: number, data: Uint8Array): Promise<void> => {
    for (let at = 0; at < data.length; at += maxChunkBytes) {
      // A copy: the memory backend keeps the very buffer it is given, and writers reuse theirs.
      const piece = data.slice(at, at + maxChunkBytes);
      const start = position + at;
      await storage.setItemRaw(chunkKey(key, start), piece);
      if (list.at(-1)!.length === 0) list.pop();
      list.push({ start, length: piece.length });
      cache = { start, data: piece };
    }
  };

  return {
    async size() {
      return settle(await relist());
    },
    async read(position, length) {
      const out = new Uint8Array(length);
      let filled = 0;
      let list = chunks ?? (position === 0 ? (chunks = [{ start: 0, length: Number.NaN }]) : await relist());
      let relisted = false;
      while (filled < length) {
        const at = position + filled;
        const end = await settle(list);
        if (at >= end) {
          if (await extend(list)) continue;
          if (relisted) break;
          // A miss where data may be: the layout changed under us (recovery cut a chunk).
          list = await relist();
          relisted = true;
          continue;
        }
        const chunk = list.findLast((c) => c.start <= at)!;
        const data = await fetchChunk(chunk);
        if (!data || chunk.start + data.length <= at) {
          if (relisted) break;
          list = await relist();
          relisted = true;
          continue;
        }
        const piece = data.subarray(at - chunk.start, Math.min(data.length, at - chunk.start + length - filled));
        out.set(piece, filled);
        filled += piece.length;
      }
      return filled === length ? out : out.subarray(0, filled);
    },
    async append(at, data) {
      const list = chunks ?? (await relist());
      const end = await settle(list);
      // Only at the end: a chunk is immutable once written (a reader may hold it).
      if (at !== end) throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver cannot append at byte ${at} of ${JSON.stringify(key)}: the log ends at ${end}.`);
      await append(list, at, data);
    },
    async truncate(length) {
      const list = chunks ?? (await relist());
      const end = await settle(list);
      if (length >= end) return; // only a torn tail is ever cut
      // Later chunks go first, last one first, so a crash leaves a contiguous prefix.
      while (list.length > 1 && list.at(-1)!.start >= length) {
        await storage.removeItem(chunkKey(key, list.pop()!.start));
      }
      const last = list.at(-1)!;
      if (last.start + last.length === length) return;
      const old = (await fetchChunk(last)) ?? new Uint8Array(0);
      const cut = old.slice(0, length - last.start);
      await storage.setItemRaw(chunkKey(key, last.start), cut);
      last.length = cut.length;
      cache = { start: last.start, data: cut };
    },
    async sync() {
      // A finished setItemRaw is as durable as the backend makes it (docs/storage.md#queues-on-unstorage).
    },
    async close() {
      cache = undefined;
    },
  };
}

/** An info record: one key, read fresh on every read (a poll), replaced whole. */
export function createRecordHandle(ctx: Context, key: string): RecordFile {
  const { storage } = ctx;
  return {
    async read() {
      return toBytes(await storage.getItemRaw(key)) ?? new Uint8Array(0);
    },
    async replace(data) {
      // A copy: the memory backend keeps the very buffer it is given, and callers reuse theirs.
      await storage.setItemRaw(key, data.slice());
    },
    async sync() {
      // A finished setItemRaw is as durable as the backend makes it (docs/storage.md#queues-on-unstorage).
    },
    async close() {},
  };
}
