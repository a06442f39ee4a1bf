/**
 * A raw-content zstd dictionary built from sample messages, in the manner of zstd's COVER
 * algorithm (Liao, Petri, Moffat, Wirth, "Effective construction of relative Lempel-Ziv
 * dictionaries", 2016), without its entropy tables: zstd from npm has no ZDICT to train one.
 *
 * Every d-mer (d = 8 bytes) is scored by how often it occurs in the samples. The samples are cut
 * into as many epochs as the dictionary has segments; from each epoch the segment of k bytes
 * whose d-mers, not yet covered by a chosen segment, score most is taken. Segments are then
 * laid out best last: zstd reaches the end of a dictionary with the shortest offsets.
 */

const D = 8;
/** Segment size: 1024 measured best on JSON log lines (64-2048 tried; bench/HISTORY.md). */
const K = 1024;
const TABLE_BITS = 20;
/** The first bytes of a dictionary in zstd's own format: raw content must not start with them. */
const TRAINED_MAGIC = [0x37, 0xa4, 0x30, 0xec];

/** A hash of the d-mer at `at` (d = 8), to TABLE_BITS bits. */
function dmer(data: Uint8Array, view: DataView, at: number): number {
  const mix = Math.imul(view.getUint32(at, true), 0x9e3779b1) ^ Math.imul(view.getUint32(at + 4, true) ^ data[at]!, 0x85ebca77);
  return (mix ^ (mix >>> 15)) >>> (32 - TABLE_BITS);
}

/** A dictionary of at most `maxBytes` chosen from `samples`, or undefined when they hold too little. */
export function buildDictionary(samples: Uint8Array[], maxBytes: number): Uint8Array | undefined {
  const total = samples.reduce((sum, s) => sum + s.length, 0);
  if (total < 2 * K || maxBytes < K) return rawDictionary(samples, maxBytes);
  if (total <= maxBytes) return rawDictionary(samples, maxBytes);
  const data = new Uint8Array(total);
  const valid = new Uint8Array(total); // 1 where a whole d-mer starts inside one sample
  let at = 0;
  for (const sample of samples) {
    data.set(sample, at);
    valid.fill(1, at, Math.max(at, at + sample.length - D + 1));
    at += sample.length;
  }
  const view = new DataView(data.buffer);
  const hashes = new Int32Array(total).fill(-1);
  const freq = new Uint32Array(1 << TABLE_BITS);
  for (let i = 0; i < total; i++) if (valid[i]) freq[(hashes[i] = dmer(data, view, i))]!++;

  const segments = Math.floor(maxBytes / K);
  const epoch = Math.max(K, Math.floor(total / segments));
  const chosen: { start: number; score: number }[] = [];
  const inWindow = new Uint16Array(1 << TABLE_BITS);
  for (let from = 0; from + K <= total && chosen.length < segments; from += epoch) {
    const to = Math.min(total, from + epoch);
    let score = 0;
    let best = { start: from, score: -1 };
    // A window of K bytes slides over the epoch; each d-mer counts once per window.
    const enter = (i: number) => {
      const h = hashes[i]!;
      if (h >= 0 && inWindow[h]!++ === 0) score += freq[h]!;
    };
    const leave = (i: number) => {
      const h = hashes[i]!;
      if (h >= 0 && --inWindow[h]! === 0) score -= freq[h]!;
    };
    for (let i = from; i < to; i++) {
      enter(i);
      if (i - from >= K - D + 1) leave(i - (K - D + 1));
      if (i - from >= K - D && score > best.score) best = { start: i - (K - D), score };
    }
    for (let i = Math.max(from, to - (K - D + 1)); i < to; i++) leave(i);
    if (best.score <= 0 || best.start + K > total) continue;
    chosen.push(best);
    for (let i = best.start; i < best.start + K - D + 1; i++) if (hashes[i]! >= 0) freq[hashes[i]!] = 0; // covered
  }
  if (chosen.length === 0) return rawDictionary(samples, maxBytes);
  chosen.sort((a, b) => a.score - b.score); // best last
  const out = new Uint8Array(chosen.length * K);
  chosen.forEach((c, i) => out.set(data.subarray(c.start, c.start + K), i * K));
  return unlikeTrained(out);
}

/** A raw-content dictionary: the newest sample bytes, the most useful last; undefined under 8 bytes. */
export function rawDictionary(samples: Uint8Array[], maxBytes: number): Uint8Array | undefined {
  const out = new Uint8Array(
    Math.min(
      maxBytes,
      samples.reduce((sum, s) => sum + s.length, 0),
    ),
  );
  let end = out.length;
  for (let i = samples.length - 1; i >= 0 && end > 0; i--) {
    const sample = samples[i]!;
    const take = Math.min(end, sample.length);
    out.set(sample.subarray(sample.length - take), end - take);
    end -= take;
  }
  return out.length >= 8 ? unlikeTrained(out) : undefined;
}

/** zstd would read content starting with the trained magic as its own format: drop a byte. */
const unlikeTrained = (dict: Uint8Array): Uint8Array => (TRAINED_MAGIC.every((b, i) => dict[i] === b) ? dict.subarray(1) : dict);
