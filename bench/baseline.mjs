/**
 * The plain-fs baseline of the engine bench (no fsync: the ceiling for in-process speed), in
 * plain JavaScript so that it runs natively, as the built v-queue does: a TypeScript loader
 * would slow the baseline and flatter the ratios.
 */
import { Buffer } from "node:buffer";
import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { crc32 } from "v-queue";

const HEADER = 25;
const MAGIC = 0xeeeffeee;
const CHUNK = 1 << 20;
const BATCH = 1000;

/**
 * Appends `count` records cycling through `pool`, built exactly as v-queue lays them out,
 * packed into a 1 MiB buffer and written with `writeSync`. Timed from open to close.
 */
export function baselineAppend(file, pool, count) {
  const start = performance.now() / 1000;
  const out = openAppender(file);
  for (let i = 0; i < count; i++) out.add(pool[i % pool.length]);
  out.close();
  return { messages: count, bytes: out.bytes, seconds: performance.now() / 1000 - start };
}

/**
 * The same appends, with one promise per message as `push()` gives (1000 awaited together):
 * the messages pending when the tick ends are written in one `writeSync`, then each promise
 * resolves with where its message landed. The least that 1000 `push()` calls cost over a bare append.
 */
export async function baselineAppendPromised(file, pool, count) {
  const start = performance.now() / 1000;
  const out = openAppender(file);
  let pending = [];
  const flush = () => {
    const batch = pending;
    pending = [];
    const positions = batch.map((p) => out.add(p.item));
    out.write();
    for (let i = 0; i < batch.length; i++) batch[i].resolve(positions[i]);
  };
  const push = (item) =>
    new Promise((resolve) => {
      if (pending.push({ item, resolve }) === 1) void Promise.resolve().then(flush);
    });
  for (let sent = 0; sent < count; sent += BATCH) {
    // As bench/engine.ts calls push(): over the pool itself when it is one batch.
    const n = Math.min(BATCH, count - sent);
    const batch = pool.length === n ? pool : Array.from({ length: n }, (_, i) => pool[(sent + i) % pool.length]);
    await Promise.all(batch.map(push));
  }
  out.close();
  return { messages: count, bytes: out.bytes, seconds: performance.now() / 1000 - start };
}

/** A file written as v-queue lays out records: `add` encodes one into a 1 MiB buffer, written out when full, by `write`, or at `close`. */
function openAppender(file) {
  const fd = openSync(file, "w");
  let buf = Buffer.allocUnsafe(CHUNK);
  let used = 0;
  let edge = 0;
  let seq = 0;
  const out = {
    bytes: 0,
    add(item) {
      const isText = typeof item === "string";
      const maxLength = isText ? item.length * 3 : item.length;
      if (used + HEADER + maxLength > buf.length) {
        out.write();
        if (HEADER + maxLength > buf.length) buf = Buffer.allocUnsafe(HEADER + maxLength);
      }
      const at = used;
      const length = isText ? buf.write(item, at + HEADER) : (buf.set(item, at + HEADER), item.length);
      const offset = edge + at;
      buf.writeUInt32LE(offset >>> 0, at);
      buf.writeUInt32LE(Math.floor(offset / 0x1_0000_0000), at + 4);
      buf.writeUInt32LE(length, at + 8);
      buf.writeUInt32LE(MAGIC, at + 12);
      buf.writeUInt32LE(++seq, at + 16);
      buf[at + 20] = isText ? 0x53 : 0x4f;
      buf.writeUInt32LE(0, at + 21);
      // Header and body are contiguous, so one crc call covers both.
      buf.writeUInt32LE(crc32(buf.subarray(at, at + HEADER + length)), at + 21);
      used += HEADER + length;
      out.bytes += length;
      return { offset, seq };
    },
    write() {
      if (used > 0) writeSync(fd, buf, 0, used);
      edge += used;
      used = 0;
    },
    close() {
      out.write();
      closeSync(fd);
    },
  };
  return out;
}

/**
 * Reads back a `baselineAppend` file in 1 MiB chunks: parses each header, checks each crc,
 * decodes each body into a message object (held in batches of 1000, like `read({ max: 1000 })`).
 * One buffer is reused for every chunk, so a body handed out is overwritten by the next chunk;
 * with `freshChunks`, each chunk is read into a new buffer, so that bodies stay valid as the
 * engine's do (the least a reader that keeps that promise allocates).
 */
export function baselineRead(file, expected, freshChunks = false) {
  const start = performance.now() / 1000;
  const fd = openSync(file, "r");
  let buf = Buffer.allocUnsafe(CHUNK);
  let pos = 0;
  let messages = 0;
  let bytes = 0;
  let batch = [];
  for (;;) {
    if (freshChunks && pos > 0) buf = Buffer.allocUnsafe(buf.length);
    const filled = readSync(fd, buf, 0, buf.length, pos);
    if (filled < HEADER) break;
    let i = 0;
    while (i + HEADER <= filled) {
      if (buf.readUInt32LE(i + 12) !== MAGIC) throw new Error(`baseline: bad magic at ${pos + i}`);
      const length = buf.readUInt32LE(i + 8);
      if (i + HEADER + length > filled) {
        // The record straddles the chunk: re-read from its start, with room for it.
        if (HEADER + length > buf.length) buf = Buffer.allocUnsafe(HEADER + length);
        break;
      }
      const stored = buf.readUInt32LE(i + 21);
      buf.writeUInt32LE(0, i + 21);
      if (crc32(buf.subarray(i, i + HEADER + length)) !== stored) throw new Error(`baseline: bad crc at ${pos + i}`);
      const body = i + HEADER;
      const data = buf[i + 20] === 0x53 ? buf.toString("utf8", body, body + length) : buf.slice(body, body + length);
      batch.push({ offset: pos + i, seq: buf.readUInt32LE(i + 16), data });
      if (batch.length === BATCH) batch = [];
      messages++;
      bytes += length;
      i += HEADER + length;
    }
    pos += i;
  }
  closeSync(fd);
  if (messages !== expected) throw new Error(`baseline: read ${messages} records, expected ${expected}`);
  return { messages, bytes, seconds: performance.now() / 1000 - start };
}
