import { crc32 as zlibCrc32 } from "node:zlib";
import { describe, expect, it } from "vitest";
import { crc32, crc32Ascii } from "../../src/format/crc32";
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
