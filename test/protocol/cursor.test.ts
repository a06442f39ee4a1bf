import { describe, expect, it } from "vitest";
import { CURSOR_RE, cursorAfter, formatCursor, isCursor, parseCursor } from "../../protocol/cursor";
import { encodeConsumeJSON } from "../../runtime/consume-json";
import { positionAfter } from "../../src/format/position";
import type { Message } from "../../src/format/message";

describe("cursor format", () => {
  it("is <part>.<position>.<count>, the position after a message", () => {
    expect(formatCursor({ part: 3, position: 1200, count: 17 })).toBe("3.1200.17");
    expect(cursorAfter({ part: 2, offset: 100, seq: 9, size: 5 })).toBe(formatCursor(positionAfter({ part: 2, offset: 100, seq: 9, size: 5 })));
    expect(parseCursor("3.1200.17")).toEqual({ part: 3, position: 1200, count: 17 });
  });

  it("checks well-formedness with one pattern", () => {
    for (const good of ["0.0.0", "1.2.3", "999999999999999.999999999999999.9999999999"]) expect(isCursor(good)).toBe(true);
    for (const bad of ["", "1.2", "1.2.3.4", "-1.2.3", "a.b.c", "1.2.3 ", " 1.2.3", "1.2.12345678901", 123, null, undefined]) {
      expect(isCursor(bad)).toBe(false);
      if (typeof bad === "string") expect(() => parseCursor(bad)).toThrow(/Invalid cursor/);
    }
    expect(CURSOR_RE.flags).toBe(""); // shared: no `g`, no lastIndex state between callers
  });

  it("is what the JSON consume fast path writes by hand", () => {
    const messages = [
      { part: 1, offset: 0, seq: 1, type: "string", data: new TextEncoder().encode("a"), size: 1 },
      { part: 12, offset: 2 ** 33, seq: 4_000_000_000, type: "object", data: new Uint8Array(70_000), size: 70_000 },
    ] as unknown as Message[];
    const body = JSON.parse(new TextDecoder().decode(encodeConsumeJSON("q", "c", messages, undefined))) as { messages: { cursor: string }[] };
    expect(body.messages.map((m) => m.cursor)).toEqual(messages.map((m) => cursorAfter(m)));
    for (const m of body.messages) expect(isCursor(m.cursor)).toBe(true);
  });
});
