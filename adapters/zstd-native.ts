/**
 * `v-queue/zstd-native`: zstd for the engine on Node through the npm package `zstd-napi` (the
 * reference C library, built by node-gyp at install as a Node-API addon; an optional peer
 * dependency of v-queue, installed by the user who wants it; zstd 1.5.7). Its frames are of the same format as those of the
 * engine's WebAssembly zstd (`zstd-codec`, an older zstd), not byte for byte the same: parts
 * written by either are read by the other. Several times faster: one
 * Node-API call per message, the input read in place, where the WebAssembly one copies it into
 * and out of the module's memory (docs/logs.md#compression).
 *
 * - `nativeZstd`: the native one, or an error saying why it cannot load;
 * - `autoZstd`: the native one when it is installed and loads, else the WebAssembly one (saying
 *   so in one line when an installed one fails to load): the default of the `v-queue` entry on
 *   Node, the server and the CLI;
 * - `selectZstd("native" | "wasm" | "auto")`: the loader for a choice (a config's `zstd`).
 *
 * `zstd-napi` has no dictionary training (ZDICT): `train` is the engine's raw-content builder.
 */
import { createRequire } from "node:module";
import { isMissingPackage } from "./missing-package";
import { buildDictionary } from "../src/compression/dictionary-builder";
import { frameContentSize, loadZstd, type Compressor, type Decompressor, type Zstd, type ZstdLoader } from "../src/compression/zstd";
import { ZSTD_CHOICES, type ZstdChoice } from "./zstd-choices";

/** The part of `zstd-napi/binding` used here (the package's own types, narrowed: it is optional, maybe not installed). */
export interface NapiBinding {
  CCtx: new () => { compressUsingCDict(dst: Uint8Array, src: Uint8Array, dict: object): number };
  CDict: new (dict: Uint8Array, level: number) => object;
  DCtx: new () => { decompressUsingDDict(dst: Uint8Array, src: Uint8Array, dict: object): number };
  DDict: new (dict: Uint8Array) => object;
  compressBound(size: number): number;
  versionString(): string;
}

export { ZSTD_CHOICES, type ZstdChoice };

export interface SelectZstdOptions {
  /** Loads the binding. @default require("zstd-napi/binding") */
  loadBinding?: () => NapiBinding;
  /** Where `"auto"` says, in one line, that it fell back to the WebAssembly zstd. @default console.warn */
  report?: (line: string) => void;
}

const requireBinding = (): NapiBinding => createRequire(import.meta.url)("zstd-napi/binding") as NapiBinding;

/** The `Zstd` interface over a loaded `zstd-napi` binding. */
export function napiZstd(binding: NapiBinding): Zstd & { version: string } {
  return {
    version: binding.versionString(),
    compressor(dict, level): Compressor {
      const cdict = new binding.CDict(dict, level);
      const cctx = new binding.CCtx();
      let scratch = new Uint8Array(0);
      return {
        compress(src) {
          const bound = binding.compressBound(src.length);
          if (scratch.length < bound) scratch = new Uint8Array(Math.max(bound, 2 * scratch.length, 4096));
          const length = cctx.compressUsingCDict(scratch, src, cdict);
          return scratch.slice(0, length);
        },
        free() {}, // the binding frees its contexts and dictionaries when they are collected
      };
    },

    decompressor(dict): Decompressor {
      const ddict = new binding.DDict(dict);
      const dctx = new binding.DCtx();
      return {
        decompress(frame, size) {
          const announced = frameContentSize(frame);
          if (announced === null) return undefined;
          if (announced !== undefined && announced !== size) return undefined;
          // A frame that does not announce its size gets one byte more: a longer content shows.
          const out = new Uint8Array(announced === undefined ? size + 1 : size);
          try {
            return dctx.decompressUsingDDict(out, frame, ddict) === size ? (out.length === size ? out : out.subarray(0, size)) : undefined;
          } catch {
            return undefined; // a bad frame, or one whose content does not fit
          }
        },
        free() {},
      };
    },

    train: buildDictionary,
  };
}

/** Why the native zstd is not there: `E_NOT_INSTALLED` (no zstd-napi package), `E_NOT_LOADED` (installed, fails to load). */
export class ZstdNativeError extends Error {
  override name = "ZstdNativeError";
  constructor(
    readonly code: "E_NOT_INSTALLED" | "E_NOT_LOADED",
    message: string,
    cause: unknown,
  ) {
    super(message, { cause });
  }
}

const loaded = new WeakMap<() => NapiBinding, Promise<Zstd>>();

function loadNative(loadBinding: () => NapiBinding): Promise<Zstd> {
  let zstd = loaded.get(loadBinding);
  if (!zstd) {
    zstd = (async () => {
      try {
        return napiZstd(loadBinding());
      } catch (error) {
        if (isMissingPackage(error, "zstd-napi")) {
          throw new ZstdNativeError(
            "E_NOT_INSTALLED",
            `The native zstd needs the npm package zstd-napi, which is not installed (an optional peer dependency of v-queue). Install it beside v-queue (\`npm install zstd-napi\`: it builds a C++ addon where no prebuilt binary fits, with python3, make and a C++ compiler), or use the WebAssembly zstd (\`zstd: "wasm"\`).`,
            error,
          );
        }
        const why = error instanceof Error ? error.message.split("\n")[0] : String(error);
        throw new ZstdNativeError(
          "E_NOT_LOADED",
          `The native zstd (npm package zstd-napi) cannot be loaded: ${why}. Reinstall it (\`npm rebuild zstd-napi\`, which needs python3, make and a C++ compiler), or use the WebAssembly zstd (\`zstd: "wasm"\`).`,
          error,
        );
      }
    })();
    zstd.catch(() => loaded.delete(loadBinding));
    loaded.set(loadBinding, zstd);
  }
  return zstd;
}

/** The native zstd (`zstd-napi`), loaded on the first call; rejects, saying why and what to do, when it cannot load. */
export const nativeZstd: ZstdLoader = () => loadNative(requireBinding);

/** The loader for a choice; `"auto"` reports its fall-back once per loader. */
export function selectZstd(
  choice: ZstdChoice = "auto",
  { loadBinding = requireBinding, report = (line) => console.warn(line) }: SelectZstdOptions = {},
): ZstdLoader {
  if (choice === "wasm") return loadZstd;
  if (choice === "native") return () => loadNative(loadBinding);
  if (choice !== "auto") throw new TypeError(`Invalid zstd ${JSON.stringify(choice)}: use one of ${ZSTD_CHOICES.map((c) => JSON.stringify(c)).join(", ")}.`);
  let chosen: Promise<Zstd> | undefined;
  return () =>
    (chosen ??= loadNative(loadBinding).catch((error: unknown) => {
      // Not installed: the user did not ask for it, nothing to say.
      if (error instanceof ZstdNativeError && error.code === "E_NOT_INSTALLED") return loadZstd();
      const why = error instanceof Error && error.cause instanceof Error ? error.cause.message.split("\n")[0] : String(error);
      report(`[v-queue] zstd: the native zstd (zstd-napi) is not available (${why}); using the WebAssembly one (zstd-codec), several times slower.`);
      return loadZstd();
    }));
}

/** The native zstd when it loads, else the WebAssembly one (one console.warn line): the default on Node. */
export const autoZstd: ZstdLoader = selectZstd("auto");
