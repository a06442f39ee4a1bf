import { crc32 as zlibCrc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { crc32, crc32Ascii, crc32Pure, crc32Range, useNativeCrc32 } from "../../src/format/crc32";
import { handNativeCrc32 } from "../../adapters/native-crc32";
import { seededRandom } from "../helpers/random";
import { formatPopInfo, formatPushInfo, formatQueueInfo, parsePopInfo, parsePushInfo, parseQueueInfo } from "../../src/format/info";
import { isValidName } from "../../src/core/names";
import { cursorAfter, formatCursor, parseCursor, positionAfter } from "../../src/format/position";

describe("crc32", () => {
  it("matches zlib for every length around the native threshold, with and without a seed", () => {
    const data = Uint8Array.from({ length: 1000 }, (_, i) => (i * 131 + 7) & 0xff);
    for (const length of [0, 1, 7, 8, 9, 25, 191, 192, 193, 1000]) {
      const part = data.subarray(0, length);
      expect(crc32(part)).toBe(zlibCrc32(part));
      expect(crc32(part, 12345)).toBe(zlibCrc32(part, 12345));
    }
  });

  it("the pure CRC-32 gives zlib's on random data: lengths 0 to 70k, at any offset, with any seed, chained", () => {
    const random = seededRandom(41);
    const data = Uint8Array.from({ length: 72_000 }, () => Math.floor(random() * 256));
    const lengths = [...Array.from({ length: 300 }, (_, n) => n), ...Array.from({ length: 60 }, () => Math.floor(random() * 70_001)), 70_000];
    for (const length of lengths) {
      const at = Math.floor(random() * 1000) % (data.length - length + 1);
      const part = data.subarray(at, at + length);
      const seed = Math.floor(random() * 2 ** 32);
      expect(crc32Pure(part)).toBe(zlibCrc32(part));
      expect(crc32Pure(part, seed)).toBe(zlibCrc32(part, seed));
      // Chained: the crc of a split input, the second part from the first's result.
      const cut = Math.floor(random() * (length + 1));
      expect(crc32Pure(part.subarray(cut), crc32Pure(part.subarray(0, cut)))).toBe(zlibCrc32(part));
    }
  });

  it("the engine's crc32 gives the same with the native one handed in (as the Node entry and the fs driver do) and without", () => {
    const random = seededRandom(7);
    const data = Uint8Array.from({ length: 5000 }, () => Math.floor(random() * 256));
    const expected = [0, 25, 191, 192, 4121, 5000].map((length) => zlibCrc32(data.subarray(0, length)));
    try {
      expect(handNativeCrc32()).toBe(true); // Node's zlib has crc32 since 20.15
      for (const use of [true, false]) {
        if (!use) useNativeCrc32(undefined);
        expect([0, 25, 191, 192, 4121, 5000].map((length) => crc32(data.subarray(0, length)))).toEqual(expected);
        expect([0, 25, 191, 192, 4121, 5000].map((length) => crc32Range(data, 0, length))).toEqual(expected);
      }
    } finally {
      handNativeCrc32();
    }
  });

  it("a host's crc32 that throws (unenv's stub in a Worker bundle) or gives other sums is not handed in", () => {
    const data = Uint8Array.from({ length: 1000 }, (_, i) => (i * 131 + 7) & 0xff);
    const calls: string[] = [];
    try {
      const stub = () => {
        calls.push("stub");
        throw new Error("[unenv] zlib.crc32 is not implemented yet!");
      };
      const wrong = (bytes: Uint8Array) => (calls.push("wrong"), bytes.length);
      expect(handNativeCrc32(stub)).toBe(false);
      expect(handNativeCrc32(wrong)).toBe(false);
      useNativeCrc32(undefined);
      expect(handNativeCrc32(stub)).toBe(false);
      expect(crc32(data)).toBe(zlibCrc32(data)); // the pure one, the stub never called again
      expect(calls).toEqual(["stub", "wrong", "stub"]);
    } finally {
      handNativeCrc32();
    }
  });

  it("gives docs/format.md's example: crc32('q;0;') = 3031747907", () => {
    expect(crc32Ascii("q;0;")).toBe(3031747907);
  });
});

describe("info lines", () => {
  it("formats lines as the crate writes them", () => {
    expect(formatQueueInfo({ queue: "q", part: 0 })).toBe("q;0;3031747907\n");
    expect(formatPushInfo({ queue: "basic_q", edge: 300, count: 10 })).toBe("basic_q;300;10;1882473836\n");
    expect(formatPopInfo({ queue: "basic_q", consumer: "c1", position: 90, count: 3, part: 0 })).toBe("basic_q;c1;90;3;0\n");
  });

  it("reads only the first line, and refuses a bad crc or another queue's line", () => {
    expect(parseQueueInfo("q;0;3031747907\nleftover;from;a;longer;line\n", "q")).toEqual({ queue: "q", part: 0 });
    expect(parseQueueInfo("q;0;3031747908\n", "q")).toBeUndefined();
    expect(parseQueueInfo("q;0;3031747907", "q")).toBeUndefined(); // torn: no newline
    expect(parseQueueInfo("q;0;3031747907\n", "other")).toBeUndefined();
    expect(parsePushInfo("basic_q;300;10;1882473836\n", "basic_q")).toEqual({ queue: "basic_q", edge: 300, count: 10 });
    expect(parsePushInfo("basic_q;301;10;1882473836\n", "basic_q")).toBeUndefined();
    expect(parsePopInfo("basic_q;c1;90;3;0\n99\n", "basic_q", "c1")).toEqual({ queue: "basic_q", consumer: "c1", position: 90, count: 3, part: 0 });
    expect(parsePopInfo("basic_q;c1;-1;3;0\n", "basic_q", "c1")).toBeUndefined();
    expect(parsePopInfo("basic_q;c2;90;3;0\n", "basic_q", "c1")).toBeUndefined();
  });
});

describe("names and cursors", () => {
  it("accepts names safe in files and info lines only", () => {
    for (const good of ["a", "basic_q", "individuals-flow", "v1.2", "x".repeat(128)]) expect(isValidName(good)).toBe(true);
    for (const bad of ["", ".", "..", "a..b", "c..", "a b", "a;b", "a/b", "a\\b", "é", "x".repeat(129), "a\nb", 5]) expect(isValidName(bad)).toBe(false);
  });

  it("gives the cursor after a message: the next record's offset and the message's seq", () => {
    for (const m of [
      { part: 0, offset: 0, seq: 1, size: 0 },
      { part: 7, offset: 123_456_789, seq: 4_000_000_000, size: 70_000 },
    ]) {
      expect(cursorAfter(m)).toBe(formatCursor(positionAfter(m)));
    }
    expect(cursorAfter({ part: 2, offset: 100, seq: 9, size: 5 })).toBe("2.130.9");
  });

  it("round-trips cursors and rejects malformed ones", () => {
    expect(parseCursor(formatCursor({ part: 3, position: 1200, count: 17 }))).toEqual({ part: 3, position: 1200, count: 17 });
    for (const bad of ["", "1.2", "1.2.3.4", "-1.2.3", "a.b.c", "1.2.3 "]) expect(() => parseCursor(bad)).toThrow(/Invalid cursor/);
  });
});
