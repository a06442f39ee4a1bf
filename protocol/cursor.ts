/**
 * Cursors on the wire: `<part>.<position>.<count>`, the position after a message, handed out
 * with each one and taken back by commit.
 */
// Written once, in the engine: its consumer takes and checks cursors, and the formula needs the
// record header size. Re-exported here, the other way round would make src/ import protocol/.
import { CURSOR_RE } from "../src/format/position";

export { CURSOR_RE, cursorAfter, formatCursor, parseCursor } from "../src/format/position";

/** Whether `value` is a well-formed cursor (not whether it names a position of any queue). */
export function isCursor(value: unknown): value is string {
  return typeof value === "string" && CURSOR_RE.test(value);
}
