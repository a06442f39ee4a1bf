import { nativeZstd } from "../../adapters/zstd-native";
import { loadZstd, type ZstdLoader } from "../../src/compression/zstd";

export interface ZstdImpl {
  name: "wasm" | "native";
  zstd: ZstdLoader;
  /** Skip its tests: only the native one, only where it did not build, never in CI (`.ci/run` installs it: there its tests must run). */
  skip: boolean;
}

const nativeLoads = await nativeZstd().then(
  () => true,
  () => false,
);

/** The two zstd implementations, for tests that run with each (and across: written by one, read by the other). */
export const ZSTD_IMPLS: ZstdImpl[] = [
  { name: "wasm", zstd: loadZstd, skip: false },
  { name: "native", zstd: nativeZstd, skip: !nativeLoads && !process.env.CI },
];

export const zstdImpl = (name: string): ZstdImpl => ZSTD_IMPLS.find((impl) => impl.name === name)!;

/** Every (writer, reader) pair of implementations. */
export const ZSTD_PAIRS = ZSTD_IMPLS.flatMap((w) => ZSTD_IMPLS.map((r) => ({ writer: w, reader: r, name: `${w.name} -> ${r.name}`, skip: w.skip || r.skip })));
