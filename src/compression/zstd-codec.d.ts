/** Types of the npm package `zstd-codec` (0.1.x ships none): the parts src/compression/zstd.ts uses. */
declare module "zstd-codec" {
  interface ZstdDict {
    close(): void;
  }
  interface ZstdSimple {
    /** A frame (with its content size) made with a digested dictionary; null on failure. */
    compressUsingDict(content: Uint8Array, cdict: ZstdDict): Uint8Array | null;
    /** The content of a frame that announces its size; null on failure. */
    decompressUsingDict(frame: Uint8Array, ddict: ZstdDict): Uint8Array | null;
  }
  interface ZstdStreaming {
    /** The content of a frame that may not announce its size; null on failure. */
    decompressUsingDict(frame: Uint8Array, sizeHint: number, ddict: ZstdDict): Uint8Array | null;
  }
  export interface ZstdBinding {
    Simple: new () => ZstdSimple;
    Streaming: new () => ZstdStreaming;
    Dict: {
      /** A CDict: the dictionary digested once for a level. */
      Compression: new (dict: Uint8Array, level: number) => ZstdDict;
      /** A DDict. */
      Decompression: new (dict: Uint8Array) => ZstdDict;
    };
  }
  export const ZstdCodec: { run(ready: (zstd: ZstdBinding) => void): void };
}
