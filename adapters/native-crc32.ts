/**
 * The host's native CRC-32, handed to the engine (src/format/crc32.ts), which imports nothing of
 * its host: zlib's `crc32` (Node >= 20.15, and Bun's or Deno's `node:zlib` where it has one).
 * The `v-queue` entry on Node and the fs driver hand it in, so the server, the CLI and Nitro
 * on Node use it; elsewhere the engine keeps its pure one.
 */
import * as zlib from "node:zlib";
import { crc32Pure, useNativeCrc32, type Crc32Function } from "../src/format/crc32";

/** Hands zlib's `crc32` (or `native`) to the engine when it is there and works; says whether it was. */
export function handNativeCrc32(native = (zlib as { crc32?: Crc32Function }).crc32): boolean {
  if (typeof native !== "function" || !givesPureResults(native)) return false;
  useNativeCrc32(native);
  return true;
}

/** A stub (unenv's `zlib` in a Worker bundle throws "not implemented") or another checksum is never handed in. */
function givesPureResults(native: Crc32Function): boolean {
  const probe = Uint8Array.from({ length: 256 }, (_, i) => i);
  try {
    return native(probe) === crc32Pure(probe) && native(probe, 0x12345678) === crc32Pure(probe, 0x12345678);
  } catch {
    return false;
  }
}
