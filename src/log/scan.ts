import type { LogFile } from "../core/driver";
import { HEADER_SIZE, checkRecordCrc, findNextHeader, readHeader, type RecordHeader } from "../format/record";

/**
 * Walks the records of a part from `from` up to `limit` (bytes known to be complete),
 * checking each crc. Bytes that are not a valid record are stepped over (the next valid
 * record is found by its magic, its self-describing offset and its crc) and reported once
 * per damaged region through `onSkip`: a bad record is never handed to `visit`.
 */
export interface ScanOptions {
  from: number;
  limit: number;
  /** Bytes read per I/O; a larger record gets a read of its own size. */
  chunkSize: number;
  onSkip(offset: number, bytes: number): void;
  /**
   * The last chunk read, kept by the caller between scans: a later scan that starts inside
   * it is served from memory. Safe because a chunk never extends past `limit`, so it only
   * holds bytes that are final.
   */
  cache?: ChunkCache;
}

export interface ChunkCache {
  buf: Uint8Array | undefined;
  /** File offset of `buf[0]`. */
  pos: number;
}

/**
 * Called for each valid record; `buf[at..]` holds its header, then its body.
 * Return false to stop after this record.
 */
export type RecordVisitor = (buf: Uint8Array, view: DataView, at: number, header: RecordHeader) => boolean;

export interface ScanResult {
  /** Where the next record starts: after the last visited record or skipped region. */
  next: number;
  /** True when the scan stopped because `visit` said so (more records may follow). */
  stopped: boolean;
}

/** The header of the record that starts at `offset` (its magic, type and own offset check out), or undefined. */
export async function readHeaderAt(file: LogFile, offset: number): Promise<RecordHeader | undefined> {
  const head = await file.read(offset, HEADER_SIZE);
  if (head.length < HEADER_SIZE) return undefined;
  return readHeader(head, new DataView(head.buffer, head.byteOffset, head.byteLength), 0, offset);
}

export async function scanPart(file: LogFile, options: ScanOptions, visit: RecordVisitor): Promise<ScanResult> {
  const { limit, chunkSize, onSkip } = options;
  let pos = options.from;
  let badFrom = -1; // start of a damaged region not yet reported
  const endBad = (at: number) => {
    if (badFrom >= 0) onSkip(badFrom, at - badFrom);
    badFrom = -1;
  };

  while (pos < limit) {
    if (limit - pos < HEADER_SIZE) {
      // Fewer bytes than a header before the known end: damage (or a torn tail).
      if (badFrom < 0) badFrom = pos;
      pos = limit;
      break;
    }
    let want = Math.min(chunkSize, limit - pos);
    let buf: Uint8Array;
    const cache = options.cache;
    if (cache?.buf && pos >= cache.pos && pos + HEADER_SIZE <= cache.pos + cache.buf.length) {
      buf = cache.buf.subarray(pos - cache.pos, Math.min(cache.buf.length, limit - cache.pos));
      want = buf.length;
    } else {
      buf = await file.read(pos, want);
      if (cache) {
        cache.buf = buf;
        cache.pos = pos;
      }
    }
    if (buf.length < HEADER_SIZE) {
      // The file is shorter than `limit` said: treat the missing end as lost.
      if (badFrom < 0) badFrom = pos;
      pos = limit;
      break;
    }
    let view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    let i = 0;
    while (i + HEADER_SIZE <= buf.length) {
      const header = readHeader(buf, view, i, pos);
      const end = header ? header.offset + HEADER_SIZE + header.length : 0;
      if (header && end <= limit) {
        if (i + HEADER_SIZE + header.length > buf.length) {
          // The body runs past this chunk: re-read from here, large enough to hold it.
          if (i === 0) {
            // A whole chunk from here (or more, for a large record): the records after it come with it.
            want = Math.max(HEADER_SIZE + header.length, Math.min(chunkSize, limit - pos));
            buf = await file.read(pos, want);
            view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
            if (cache) {
              cache.buf = buf;
              cache.pos = pos;
            }
            if (buf.length < want) break; // file shorter than expected: handled below
          } else break;
        }
        if (checkRecordCrc(buf, view, i, header)) {
          endBad(pos + i);
          const more = visit(buf, view, i, header);
          i += HEADER_SIZE + header.length;
          if (!more) return { next: pos + i, stopped: true };
          continue;
        }
      }
      // Not a valid record here: remember where the damage starts and look for the next magic.
      if (badFrom < 0) badFrom = pos + i;
      const next = findNextHeader(buf, i + 1);
      if (next < 0) {
        // No candidate in this chunk; keep the last bytes, a header may straddle the boundary.
        i = pos + buf.length >= limit ? buf.length : Math.max(i + 1, buf.length - HEADER_SIZE + 1);
        break;
      }
      i = next;
    }
    if (i === 0 && buf.length < want) {
      // Could not read a record the header promised: the file ends early.
      if (badFrom < 0) badFrom = pos;
      pos = limit;
      break;
    }
    pos += i;
  }
  endBad(pos);
  return { next: pos, stopped: false };
}
