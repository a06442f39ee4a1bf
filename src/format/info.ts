import { crc32Ascii } from "./crc32";

/**
 * The three info files (docs/format.md#info-lines). Each holds one `;`-separated line; the crate rewrites
 * them in place without truncating, so anything after the first `\n` is ignored.
 */

export interface QueueInfo {
  queue: string;
  part: number;
}

export interface PushInfo {
  queue: string;
  /** Right edge of the part in bytes. */
  edge: number;
  /** Records in the part. */
  count: number;
}

export interface PopInfo {
  queue: string;
  consumer: string;
  /** Byte position in the part of the next record to read. */
  position: number;
  /** Records read in the part. */
  count: number;
  part: number;
}

/** `Q;<part>;<crc>\n` */
export function formatQueueInfo(info: QueueInfo): string {
  return withCrc(`${info.queue};${info.part};`);
}

/** `Q;<edge>;<count>;<crc>\n` */
export function formatPushInfo(info: PushInfo): string {
  return withCrc(`${info.queue};${info.edge};${info.count};`);
}

/** `Q;C;<position>;<count>;<part>\n` (no crc, as the crate writes it) */
export function formatPopInfo(info: PopInfo): string {
  return `${info.queue};${info.consumer};${info.position};${info.count};${info.part}\n`;
}

export function parseQueueInfo(text: string, queue: string): QueueInfo | undefined {
  const fields = checkedFields(text, 3);
  if (!fields || fields[0] !== queue) return undefined;
  const part = toUint(fields[1]);
  return part === undefined ? undefined : { queue, part };
}

export function parsePushInfo(text: string, queue: string): PushInfo | undefined {
  const fields = checkedFields(text, 4);
  if (!fields || fields[0] !== queue) return undefined;
  const edge = toUint(fields[1]);
  const count = toUint(fields[2]);
  return edge === undefined || count === undefined ? undefined : { queue, edge, count };
}

export function parsePopInfo(text: string, queue: string, consumer: string): PopInfo | undefined {
  const line = firstLine(text);
  if (line === undefined) return undefined;
  const fields = line.split(";");
  if (fields.length !== 5 || fields[0] !== queue || fields[1] !== consumer) return undefined;
  const position = toUint(fields[2]);
  const count = toUint(fields[3]);
  const part = toUint(fields[4]);
  if (position === undefined || count === undefined || part === undefined) return undefined;
  return { queue, consumer, position, count, part };
}

// --- Internal helpers ---

function withCrc(prefix: string): string {
  return `${prefix}${crc32Ascii(prefix)}\n`;
}

function firstLine(text: string): string | undefined {
  const end = text.indexOf("\n");
  return end < 0 ? undefined : text.slice(0, end);
}

/** Splits the first line and checks its trailing crc over everything up to the last `;`. */
function checkedFields(text: string, count: number): string[] | undefined {
  const line = firstLine(text);
  if (line === undefined) return undefined;
  const cut = line.lastIndexOf(";");
  if (cut < 0) return undefined;
  const crc = toUint(line.slice(cut + 1));
  if (crc === undefined || crc !== crc32Ascii(line.slice(0, cut + 1))) return undefined;
  const fields = line.split(";");
  return fields.length === count ? fields : undefined;
}

function toUint(text: string | undefined): number | undefined {
  if (!text || !/^\d{1,16}$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}
