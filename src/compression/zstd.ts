import { buildDictionary } from "./dictionary-builder";

/**
 * zstd for the engine: by default the npm package `zstd-codec` (the reference C library
 * compiled to WebAssembly by emscripten, MIT), so it runs wherever the engine does, with no
 * `node:` import here. Loaded on first use only (`loadZstd`, a dynamic import): a queue without
 * compression never loads it. Another implementation of `Zstd` can be given to a writer or a
 * consumer as its `zstd` option (a `ZstdLoader`): on Node, `v-queue/zstd-native` (the native
 * library through the npm package `zstd-napi`), which the Node entry, the server and the CLI
 * use when it loads. Each reads the other's frames (the same format, not byte for byte the same: other zstd versions).
 *
 * A dictionary is digested once (a CDict or a DDict) and reused for every message of its
 * part: re-digesting 16 KiB per message would cost more than compressing it. The package has
 * no dictionary training (ZDICT): `train` builds a raw-content dictionary in TypeScript
 * (compression/dictionary-builder.ts); a dictionary trained offline can be given to the writer instead.
 */

/** Compresses with one dictionary (digested once). */
export interface Compressor {
  /** The zstd frame of `src` (with its content size). */
  compress(src: Uint8Array): Uint8Array;
  free(): void;
}

/** Decompresses frames made with one dictionary (digested once). */
export interface Decompressor {
  /** The content of `frame`, which must be exactly `size` bytes; undefined when the frame is bad or of another size. */
  decompress(frame: Uint8Array, size: number): Uint8Array | undefined;
  free(): void;
}

export interface Zstd {
  compressor(dict: Uint8Array, level: number): Compressor;
  decompressor(dict: Uint8Array): Decompressor;
  /** A raw-content dictionary of at most `maxBytes` from `samples`, or undefined when they are too few. */
  train(samples: Uint8Array[], maxBytes: number): Uint8Array | undefined;
}

/**
 * Gives the zstd implementation, loading it on the first call (the option `zstd` of writers and
 * consumers). Called when a part is compressed or read compressed, never for a queue without.
 */
export type ZstdLoader = () => Promise<Zstd>;

let loading: Promise<Zstd> | undefined;

/** The WebAssembly zstd (`zstd-codec`), loaded on the first call (later calls share it): the engine's default `zstd`. */
export const loadZstd: ZstdLoader = () => {
  loading ??= instantiate().catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
};

async function instantiate(): Promise<Zstd> {
  const mod = (await import("zstd-codec")) as typeof import("zstd-codec") & { default?: typeof import("zstd-codec") };
  const codec = mod.ZstdCodec ?? mod.default!.ZstdCodec;
  const binding = await new Promise<import("zstd-codec").ZstdBinding>((ready) => codec.run(ready));
  const simple = new binding.Simple();
  const streaming = new binding.Streaming();
  const attempt = <T>(run: () => T | null): T | undefined => {
    try {
      return run() ?? undefined;
    } catch {
      return undefined;
    }
  };

  return {
    compressor(dict, level) {
      const cdict = new binding.Dict.Compression(dict, level);
      return {
        compress(input) {
          const frame = attempt(() => simple.compressUsingDict(input, cdict));
          if (!frame) throw new Error("zstd: compression failed");
          return frame;
        },
        free: () => cdict.close(),
      };
    },

    decompressor(dict) {
      const ddict = new binding.Dict.Decompression(dict);
      return {
        decompress(frame, size) {
          const announced = frameContentSize(frame);
          if (announced === null) return undefined;
          if (announced !== undefined && announced !== size) return undefined;
          // A frame that announces its size is decompressed into exactly that; one that does not, by streaming.
          const body = attempt(() => (announced ? simple.decompressUsingDict(frame, ddict) : streaming.decompressUsingDict(frame, size + 1, ddict)));
          return body && body.length === size ? body : undefined;
        },
        free: () => ddict.close(),
      };
    },

    train: buildDictionary,
  };
}

/**
 * The content size a zstd frame's header announces (RFC 8878, 3.1.1.1): a number, undefined
 * when the frame does not say, null when this is not a zstd frame header.
 */
export function frameContentSize(frame: Uint8Array): number | undefined | null {
  if (frame.length < 6 || frame[0] !== 0x28 || frame[1] !== 0xb5 || frame[2] !== 0x2f || frame[3] !== 0xfd) return null;
  const descriptor = frame[4]!;
  const single = (descriptor >> 5) & 1;
  const at = 5 + (single ? 0 : 1) + [0, 1, 2, 4][descriptor & 3]!;
  const width = [single, 2, 4, 8][descriptor >> 6]!;
  if (width === 0) return undefined;
  if (frame.length < at + width) return null;
  const view = new DataView(frame.buffer, frame.byteOffset + at, width);
  if (width === 1) return view.getUint8(0);
  if (width === 2) return view.getUint16(0, true) + 256;
  if (width === 4) return view.getUint32(0, true);
  return view.getUint32(4, true) === 0 ? view.getUint32(0, true) : Number.MAX_SAFE_INTEGER;
}
