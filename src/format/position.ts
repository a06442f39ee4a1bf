import { VQueueError } from "../core/errors";
import type { Message } from "./message";
import { HEADER_SIZE } from "./record";

/** A consumer's place in a queue: the part, the byte position in it, and the records read in it. */
export interface ConsumerPosition {
  part: number;
  position: number;
  count: number;
}

/** The position right after `message`: committing it commits the message and all before it. */
export function positionAfter(message: Pick<Message, "part" | "offset" | "seq" | "size" | "stored">): ConsumerPosition {
  return { part: message.part, position: message.offset + HEADER_SIZE + (message.stored ?? message.size), count: message.seq };
}

/** An opaque-looking, URL-safe cursor for a position: `<part>.<position>.<count>`. */
export function formatCursor(position: ConsumerPosition): string {
  return position.part + "." + position.position + "." + position.count;
}

/** `formatCursor(positionAfter(message))`, without the object in between (once per message handed out). */
export function cursorAfter(message: Pick<Message, "part" | "offset" | "seq" | "size" | "stored">): string {
  return message.part + "." + (message.offset + HEADER_SIZE + (message.stored ?? message.size)) + "." + message.seq;
}

/** A well-formed cursor (not necessarily one of this queue): the one pattern the engine, the server and the CLI check. */
export const CURSOR_RE = /^(\d{1,15})\.(\d{1,15})\.(\d{1,10})$/;

export function parseCursor(cursor: string): ConsumerPosition {
  const match = typeof cursor === "string" ? CURSOR_RE.exec(cursor) : null;
  if (!match) {
    throw new VQueueError("E_CURSOR", `Invalid cursor ${JSON.stringify(cursor)}: expected "<part>.<position>.<count>" as returned with a message.`);
  }
  return { part: Number(match[1]), position: Number(match[2]), count: Number(match[3]) };
}

/** Orders two positions: negative when `a` comes first. */
export function comparePositions(a: ConsumerPosition, b: ConsumerPosition): number {
  return a.part - b.part || a.position - b.position;
}
