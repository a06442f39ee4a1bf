import { describe, expect, it } from "vitest";
import { buildDictionary, rawDictionary } from "../../src/compression/dictionary-builder";
import { loadZstd } from "../../src/compression/zstd";

/** The raw-content dictionary builder (COVER-like, src/compression/dictionary-builder.ts). */

const enc = new TextEncoder();
/** JSON lines with common structure and varying values, like the logs the option is for. */
const line = (i: number) =>
  enc.encode(
    JSON.stringify({
      ts: new Date(1_764_748_800_000 + i * 997).toISOString(),
      level: ["info", "warn", "error"][i % 3],
      service: ["checkout", "search", "auth", "billing"][i % 4],
      request_id: ((i * 2654435761) % 4294967296).toString(16),
      msg: `handled request ${i} in ${(i * 37) % 900} ms`,
      http: {
        method: i % 5 ? "GET" : "POST",
        path: `/api/v2/orders/${i * 13}`,
        status: i % 11 ? 200 : 503,
        agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)",
      },
      pad: "x".repeat(i % 200),
    }),
  );

describe("buildDictionary", () => {
  const samples = Array.from({ length: 400 }, (_, i) => line(i));
  const text = new TextDecoder().decode(Buffer.concat(samples));

  it("is at most maxBytes, made of 1 KiB pieces of the samples, never the trained magic", () => {
    const dict = buildDictionary(samples, 16 * 1024)!;
    expect(dict.length).toBeGreaterThan(8 * 1024);
    expect(dict.length).toBeLessThanOrEqual(16 * 1024);
    for (let at = 0; at + 1024 <= dict.length; at += 1024) expect(text.includes(new TextDecoder().decode(dict.subarray(at, at + 1024)))).toBe(true);
    expect(buildDictionary([Uint8Array.of(0x37, 0xa4, 0x30, 0xec, 1, 2, 3, 4, 5)], 16)!.subarray(0, 4)).not.toEqual(Uint8Array.of(0x37, 0xa4, 0x30, 0xec));
  });

  it("takes everything when the samples fit, and nothing under 8 bytes", () => {
    expect(buildDictionary([enc.encode("abcdef"), enc.encode("ghijkl")], 1024)).toEqual(enc.encode("abcdefghijkl"));
    expect(buildDictionary([enc.encode("abc")], 1024)).toBeUndefined();
    expect(rawDictionary(samples, 100)).toEqual(samples.at(-1)!.subarray(-100));
  });

  it("compresses later lines at least as well as the newest raw bytes", async () => {
    const zstd = await loadZstd();
    const later = Array.from({ length: 400 }, (_, i) => line(10_000 + i * 7));
    const size = (dict: Uint8Array) => {
      const c = zstd.compressor(dict, 3);
      const total = later.reduce((sum, l) => sum + c.compress(l).length, 0);
      c.free();
      return total;
    };
    const built = size(buildDictionary(samples, 4096)!);
    const raw = size(rawDictionary(samples, 4096)!);
    expect(built).toBeLessThanOrEqual(raw * 1.02);
    expect(built).toBeLessThan(later.reduce((sum, l) => sum + l.length, 0) / 3);
  });
});
