// Apart from zstd-native.ts (node:module): the config schema checks the choice in any runtime (a Nitro app's too).
export const ZSTD_CHOICES = ["auto", "native", "wasm"] as const;
/** Which zstd: `"native"` (`zstd-napi`, fails when it cannot load), `"wasm"` (`zstd-codec`), `"auto"` (native, else wasm). */
export type ZstdChoice = (typeof ZSTD_CHOICES)[number];
