/**
 * CRC-32 (zlib's polynomial), the checksum of every record and info line.
 *
 * Pure JavaScript by default: the engine imports nothing of its host. A host with a native
 * CRC-32 hands it in (`useNativeCrc32`), as it hands in a zstd: on Node the `v-queue` entry and
 * the fs driver give zlib's (adapters/native-crc32.ts). A native call costs more than the
 * table lookup for short inputs, so short inputs (record headers, small records, info lines)
 * stay in JavaScript either way.
 */

/** zlib's `crc32(data, value)`: the CRC-32 of `data`, continuing from `value` (a previous result; 0 to start). */
export type Crc32Function = (data: Uint8Array, value?: number) => number;

const table = /* @__PURE__ */ makeTable();
let nativeCrc32: Crc32Function | undefined;
const NATIVE_THRESHOLD = 192;

/**
 * Makes the engine use `native` for inputs of 192 bytes or more (undefined: the pure one
 * again). It must give zlib's results, chained values included: the files are the crate's.
 */
export function useNativeCrc32(native: Crc32Function | undefined): void {
  nativeCrc32 = native;
}

export function crc32(data: Uint8Array, seed = 0): number {
  if (nativeCrc32 && data.length >= NATIVE_THRESHOLD) return nativeCrc32(data, seed);
  return crc32js(data, seed, 0, data.length);
}

/** The pure JavaScript CRC-32 of `data`, whatever a host handed in (what it is checked against). */
export function crc32Pure(data: Uint8Array, seed = 0): number {
  return crc32js(data, seed, 0, data.length);
}

/** CRC-32 of `data[start..end)`, without allocating a view. */
export function crc32Range(data: Uint8Array, start: number, end: number, seed = 0): number {
  if (nativeCrc32 && end - start >= NATIVE_THRESHOLD) return nativeCrc32(data.subarray(start, end), seed);
  return crc32js(data, seed, start, end);
}

/** CRC-32 of an ASCII string (info lines), same as over its UTF-8 bytes for ASCII. */
export function crc32Ascii(text: string): number {
  let c = ~0;
  for (let i = 0; i < text.length; i++) c = table[(c ^ text.charCodeAt(i)) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

// --- Internal helpers ---

function crc32js(b: Uint8Array, seed: number, start: number, end: number): number {
  const t = table;
  let c = ~seed;
  let i = start;
  // Slicing-by-8: eight table lookups per eight bytes.
  for (; i + 8 <= end; i += 8) {
    c ^= b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24);
    const hi = b[i + 4]! | (b[i + 5]! << 8) | (b[i + 6]! << 16) | (b[i + 7]! << 24);
    c =
      t[1792 + (c & 0xff)]! ^
      t[1536 + ((c >>> 8) & 0xff)]! ^
      t[1280 + ((c >>> 16) & 0xff)]! ^
      t[1024 + (c >>> 24)]! ^
      t[768 + (hi & 0xff)]! ^
      t[512 + ((hi >>> 8) & 0xff)]! ^
      t[256 + ((hi >>> 16) & 0xff)]! ^
      t[hi >>> 24]!;
  }
  for (; i < end; i++) c = t[(c ^ b[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

function makeTable(): Int32Array {
  const t = new Int32Array(256 * 8);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
}
