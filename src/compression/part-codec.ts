import { DICT_MAX_BYTES, dictPath, findDictionary, type FoundDictionary } from "./dictionary";
import type { DriverLock, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { partDir } from "../storage/paths";
import type { Compressor, Decompressor, ZstdLoader } from "./zstd";
import { writeWhole } from "../storage/write-whole";

/**
 * Compressed bodies of v3 records (docs/format.md#v3-parts): a record whose type byte has the
 * flag 0x80 stores a u32 (little-endian: the body's real length) and a zstd frame made with
 * its part's dictionary. The record's crc covers those stored bytes, as in v2.
 */

export const LENGTH_PREFIX = 4;

/** Reads a part's compressed bodies: its dictionary found and digested once. */
export class PartDecoder {
  readonly dictionary: FoundDictionary | undefined;
  readonly #decompressor: Decompressor | undefined;

  private constructor(dictionary: FoundDictionary | undefined, decompressor: Decompressor | undefined) {
    this.dictionary = dictionary;
    this.#decompressor = decompressor;
  }

  /** Looks for the part's dictionary (compression/dictionary.ts); zstd is loaded (`zstd()`) only when there is one. */
  static async open(driver: QueueDriver, queue: string, part: number, zstd: ZstdLoader): Promise<PartDecoder> {
    const found = await findDictionary(driver, queue, part);
    if (!found) return new PartDecoder(undefined, undefined);
    return new PartDecoder(found, (await zstd()).decompressor(found.bytes));
  }

  /** The body of a compressed record from its stored bytes, or what is wrong with them. */
  decode(stored: Uint8Array): { body: Uint8Array } | { problem: QueueProblem["code"]; why: string } {
    if (!this.#decompressor) return { problem: "NO_DICTIONARY", why: "its part has no dictionary (looked for Q-<id>/Q_dict, Q_dict-<id> and Q_dict_<id>)" };
    if (stored.length < LENGTH_PREFIX + 1) return { problem: "BAD_COMPRESSED", why: "it is too short for a length and a zstd frame" };
    const size = new DataView(stored.buffer, stored.byteOffset, LENGTH_PREFIX).getUint32(0, true);
    const body = this.#decompressor.decompress(stored.subarray(LENGTH_PREFIX), size);
    return body
      ? { body }
      : { problem: "BAD_COMPRESSED", why: `its zstd frame does not decompress to the ${size} bytes it announces with the part's dictionary` };
  }

  free(): void {
    this.#decompressor?.free();
  }
}

export interface EncoderOptions {
  driver: QueueDriver;
  queue: string;
  part: number;
  level: number;
  /** Bodies under this many bytes are stored raw. */
  minBytes: number;
  /** Bytes of bodies to learn the dictionary from before compressing. */
  sampleBytes: number;
  /** Make the dictionary durable (fsync) before any record uses it. */
  sync: boolean;
  /** A dictionary given by the user (trained offline): used for every body, nothing learnt. */
  dictionary?: Uint8Array;
  /** The zstd implementation (the writer's option `zstd`). */
  zstd: ZstdLoader;
  /** The writer's lock: the fence of the dictionary's write (core/driver.ts). */
  fence?: DriverLock;
}

/**
 * Writes a v3 part's compressed bodies. Without a dictionary given, the part's first bodies
 * are stored raw while the encoder learns from them, then a raw-content dictionary is built
 * from them (compression/dictionary-builder.ts); a given dictionary is used from the first body on. Either
 * is written atomically as the part's `Q_dict` before any record uses it, and bodies are
 * compressed with it, each one kept raw when compression does not pay.
 */
export class PartEncoder {
  readonly #options: EncoderOptions;
  #samples: Uint8Array[] = [];
  #sampled = 0;
  #compressor: Compressor | undefined;

  constructor(options: EncoderOptions) {
    this.#options = options;
  }

  /** Whether bodies are being compressed (the dictionary is written). */
  get compressing(): boolean {
    return this.#compressor !== undefined;
  }

  /** Enough is learnt: `prepare()` before the next body makes the dictionary. */
  get learnt(): boolean {
    return !this.#compressor && (this.#options.dictionary !== undefined || this.#sampled >= this.#options.sampleBytes);
  }

  /** Once enough is learnt, makes and writes the dictionary (records before it must be written first). */
  async prepare(): Promise<void> {
    if (!this.learnt) return;
    const { driver, queue, part, level, sync, fence } = this.#options;
    const zstd = await this.#options.zstd();
    // At least sampleBytes (1 KiB or more) were learnt: a dictionary is always built.
    const dict = this.#options.dictionary ?? zstd.train(this.#samples, DICT_MAX_BYTES)!;
    await writeWhole(driver, dictPath(queue, part), dict, sync, fence);
    if (sync) await driver.syncDir?.(partDir(queue, part));
    this.#compressor = zstd.compressor(dict, level);
    this.#samples = [];
  }

  /**
   * Compresses the body at `buf[at..at+length]` in place when that pays: returns the stored
   * length (prefix and frame), or undefined to keep it raw. Learns from it meanwhile.
   */
  encode(buf: Uint8Array, view: DataView, at: number, length: number): number | undefined {
    if (length < this.#options.minBytes) return undefined;
    if (!this.#compressor) {
      if (!this.#options.dictionary && this.#sampled < this.#options.sampleBytes) {
        this.#samples.push(buf.slice(at, at + length));
        this.#sampled += length;
      }
      return undefined;
    }
    const frame = this.#compressor.compress(buf.subarray(at, at + length));
    if (LENGTH_PREFIX + frame.length >= length) return undefined;
    view.setUint32(at, length, true);
    buf.set(frame, at + LENGTH_PREFIX); // the frame is a copy: no overlap with `buf`
    return LENGTH_PREFIX + frame.length;
  }

  free(): void {
    this.#compressor?.free();
    this.#compressor = undefined;
  }
}
