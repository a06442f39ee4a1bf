/**
 * A message's attributes (`priority`, `maxDeliveries`, `backoff`), given at produce and kept
 * beside its record, never in it: the part stays byte for byte what the crate reads. They live in
 * a side file of the part, `Q-N/Q_attrs` (storage/paths.ts), as runs: one frame (storage/side-log.ts)
 * for the messages of one produce that landed together in a part, appended before their records
 * (so a reader that has read a record finds its run) and cut with them (writer/attributes.ts).
 *
 * A run's payload: `u8 1 | f64 first offset | u32 first seq | u32 count | u32 CRC-32 of the first
 * record | u8 priority | u32 maxDeliveries (0: the consumer's) | u8 backoff kind (0 none, 1
 * fixed, 2 exponential) | u32 backoff delay ms | u32 group length | group (ASCII)`. A reader applies a run only to the records it
 * names whose first record's CRC matches (a run left by a write that a crash cut short names
 * records that were written again since, with other bytes). A CUT, `u8 2 | u32 count`, says that
 * the part was cut after record `count` (writer/attributes.ts): the runs before it name no record
 * past it.
 */
import { FieldWriter } from "./fields";
import { showValue } from "../core/check";

/** How long a message waits before it comes again after a failed delivery. */
export interface Backoff {
  /** `fixed`: `delayMs` each time; `exponential`: `delayMs * 2^(failures - 1)`, at most `MAX_BACKOFF_MS`. */
  type: "fixed" | "exponential";
  delayMs: number;
}

/** What a message may carry beside its record. */
export interface MessageAttributes {
  /** 0 to `MAX_PRIORITY`, higher first (shared consumers); 0 is the default. */
  priority?: number;
  /** Deliveries before it goes to the dead-letter queue, instead of the consumer's `maxDeliveries`. */
  maxDeliveries?: number;
  /** The wait before it comes again after a nack that names no delay, instead of the consumer's `backoff`. */
  backoff?: Backoff;
  /** Its group: a shared consumer leases a group's messages one at a time (`groupConcurrency`), in order. 1 to 255 printable ASCII characters. */
  group?: string;
}

export const MAX_PRIORITY = 255;
export const MAX_ATTRIBUTE_DELIVERIES = 1_000_000;
/** The longest backoff: a day. */
export const MAX_BACKOFF_MS = 24 * 3600 * 1000;

const RUN = 1;
const GROUP = /^[\x20-\x7e]{1,255}$/;
const ascii = new TextEncoder();
const asciiText = new TextDecoder();
const CUT = 2;
const BACKOFF_KINDS = ["fixed", "exponential"] as const;

/** The messages of one produce that landed together in a part, and their attributes. */
export interface AttributeRun {
  offset: number;
  seq: number;
  count: number;
  /** The CRC-32 of the run's first record. */
  crc: number;
  attributes: MessageAttributes;
}

/** What is wrong with `value` as message attributes at `name`, if anything (each problem says what is allowed). */
export function attributeProblems(value: unknown, name = "attributes"): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return [`Invalid ${name} ${showValue(value)}: expected an object such as { "priority": 5 }.`];
  const problems: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (key === "priority") {
      if (!Number.isInteger(v) || (v as number) < 0 || (v as number) > MAX_PRIORITY)
        problems.push(`Invalid priority ${showValue(v)}: use an integer from 0 (the default) to ${MAX_PRIORITY}, higher first.`);
    } else if (key === "maxDeliveries") {
      if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > MAX_ATTRIBUTE_DELIVERIES)
        problems.push(`Invalid maxDeliveries ${showValue(v)}: use an integer from 1 to ${MAX_ATTRIBUTE_DELIVERIES}.`);
    } else if (key === "backoff") problems.push(...backoffProblems(v, "backoff"));
    else if (key === "group") {
      if (typeof v !== "string" || !GROUP.test(v))
        problems.push(`Invalid group ${showValue(v)}: use 1 to 255 printable ASCII characters (a customer id, say).`);
    } else problems.push(`Unknown message attribute "${key}": use priority, maxDeliveries, backoff, group.`);
  }
  return problems;
}

/** What is wrong with `value` as a backoff at `name`, if anything. */
export function backoffProblems(value: unknown, name: string): string[] {
  const example = `{ "type": "exponential", "delayMs": 1000 }`;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    return [`Invalid ${name} ${showValue(value)}: expected an object such as ${example}.`];
  const { type, delayMs, ...rest } = value as Record<string, unknown>;
  const problems: string[] = [];
  if (!BACKOFF_KINDS.includes(type as Backoff["type"])) problems.push(`Invalid ${name}.type ${showValue(type)}: use "fixed" or "exponential".`);
  if (!Number.isInteger(delayMs) || (delayMs as number) < 0 || (delayMs as number) > MAX_BACKOFF_MS)
    problems.push(`Invalid ${name}.delayMs ${showValue(delayMs)}: use an integer from 0 to ${MAX_BACKOFF_MS} (a day).`);
  for (const key of Object.keys(rest)) problems.push(`Unknown key "${name}.${key}": use type, delayMs.`);
  return problems;
}

/** The attributes without their defaults (priority 0), or undefined when nothing is left. */
export function meaningfulAttributes(attributes: MessageAttributes | undefined): MessageAttributes | undefined {
  if (!attributes) return undefined;
  const { priority, maxDeliveries, backoff, group } = attributes;
  const out: MessageAttributes = {};
  if (priority) out.priority = priority;
  if (group !== undefined) out.group = group;
  if (maxDeliveries !== undefined) out.maxDeliveries = maxDeliveries;
  if (backoff !== undefined) out.backoff = { type: backoff.type, delayMs: backoff.delayMs };
  return Object.keys(out).length > 0 ? out : undefined;
}

/** The wait before delivery `failures + 1` after `failures` failed ones. */
export function backoffDelay(backoff: Backoff, failures: number): number {
  if (backoff.type === "fixed") return backoff.delayMs;
  return Math.min(MAX_BACKOFF_MS, backoff.delayMs * 2 ** Math.min(40, Math.max(0, failures - 1)));
}

export function encodeAttributeRun(run: AttributeRun): Uint8Array {
  const { priority = 0, maxDeliveries = 0, backoff, group } = run.attributes;
  return new FieldWriter()
    .u8(RUN)
    .f64(run.offset)
    .u32(run.seq)
    .u32(run.count)
    .u32(run.crc)
    .u8(priority)
    .u32(maxDeliveries)
    .u8(backoff ? BACKOFF_KINDS.indexOf(backoff.type) + 1 : 0)
    .u32(backoff?.delayMs ?? 0)
    .bytes(group === undefined ? new Uint8Array(0) : ascii.encode(group))
    .done();
}

/** A CUT frame: the part ends after record `count` (runs before it name none past it). */
export function encodeAttributeCut(count: number): Uint8Array {
  return new FieldWriter().u8(CUT).u32(count).done();
}

/** A frame of `Q_attrs`: a run, a cut, or undefined (a frame of a later version: skipped). */
export function decodeAttributeFrame(payload: Uint8Array): { run: AttributeRun } | { cut: number } | undefined {
  const frame = decodeFrameAt(payload, new DataView(payload.buffer, payload.byteOffset, payload.byteLength), 0, payload.length);
  return frame === undefined ? undefined : typeof frame === "number" ? { cut: frame } : { run: frame };
}

/** The frame at `bytes[start..end)` (`view` over all of `bytes`): a run, a cut's count, or undefined. Reads in place: a run is the only object made. */
function decodeFrameAt(bytes: Uint8Array, view: DataView, start: number, end: number): AttributeRun | number | undefined {
  const length = end - start;
  if (bytes[start] === CUT && length >= 5) return view.getUint32(start + 1, true);
  if (bytes[start] !== RUN || length < 31) return undefined;
  const priority = bytes[start + 21]!;
  const maxDeliveries = view.getUint32(start + 22, true);
  const kind = bytes[start + 26]!;
  const groupLength = length >= 35 ? Math.min(view.getUint32(start + 31, true), length - 35) : 0;
  const grouped = groupLength > 0 ? groupAt(bytes, start + 35, groupLength) : undefined;
  let attributes: MessageAttributes;
  if (grouped !== undefined && priority === 0 && maxDeliveries === 0 && kind === 0) attributes = grouped;
  else attributes = grouped === undefined ? {} : { group: grouped.group };
  if (priority > 0) attributes.priority = priority;
  if (maxDeliveries > 0) attributes.maxDeliveries = maxDeliveries;
  if (kind > 0 && kind <= BACKOFF_KINDS.length) attributes.backoff = { type: BACKOFF_KINDS[kind - 1]!, delayMs: view.getUint32(start + 27, true) };
  return {
    offset: view.getFloat64(start + 1, true),
    seq: view.getUint32(start + 9, true),
    count: view.getUint32(start + 13, true),
    crc: view.getUint32(start + 17, true),
    attributes,
  };
}

/**
 * The attributes of groups decoded lately, by a hash of the group's bytes (a slot each, the last
 * one wins): a run of a group seen again, with no other attribute, shares one frozen object
 * (a part's runs are one per produce call, a hundred thousand of them: as many objects fewer to
 * keep), and its group string (its hash kept by V8 for the maps keyed by it). A fixed table, not
 * a map: a stream of groups never seen again costs no growth.
 */
const groupSlots: (Readonly<{ group: string }> | undefined)[] = new Array<Readonly<{ group: string }> | undefined>(1 << 14).fill(undefined);

/** `{ group }` for the ASCII group at `bytes[start..start + length)`, the same object while its slot keeps it. */
function groupAt(bytes: Uint8Array, start: number, length: number): Readonly<{ group: string }> {
  let hash = 0x811c9dc5;
  for (let i = start; i < start + length; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  const slot = (hash ^ (hash >>> 15)) & (groupSlots.length - 1);
  const known = groupSlots[slot];
  if (known !== undefined && sameAscii(known.group, bytes, start, length)) return known;
  let group = "";
  if (length > 32) group = asciiText.decode(bytes.subarray(start, start + length));
  else for (let i = start; i < start + length; i++) group += String.fromCharCode(bytes[i]!);
  return (groupSlots[slot] = Object.freeze({ group }));
}

function sameAscii(text: string, bytes: Uint8Array, start: number, length: number): boolean {
  if (text.length !== length) return false;
  for (let i = 0; i < length; i++) if (text.charCodeAt(i) !== bytes[start + i]) return false;
  return true;
}

/**
 * A part's runs, from its `Q_attrs` frames in file order: each CUT shortens (or drops) the runs
 * past it, so runs stay sorted by seq and never overlap.
 */
export class PartAttributeRuns {
  readonly runs: AttributeRun[] = [];

  /** The last seq a run names (0 when none). */
  get coveredTo(): number {
    const last = this.runs.at(-1);
    return last ? last.seq + last.count - 1 : 0;
  }

  apply(payload: Uint8Array): void {
    this.applyAt(payload, new DataView(payload.buffer, payload.byteOffset, payload.byteLength), 0, payload.length);
  }

  /** Applies the frame at `bytes[start..end)` (`view` over all of `bytes`), read in place. */
  applyAt(bytes: Uint8Array, view: DataView, start: number, end: number): void {
    const frame = decodeFrameAt(bytes, view, start, end);
    if (frame === undefined) return;
    if (typeof frame !== "number") {
      if (frame.seq > this.coveredTo) this.runs.push(frame);
      return;
    }
    const cut = frame;
    while (this.runs.length > 0 && this.runs.at(-1)!.seq > cut) this.runs.pop();
    const last = this.runs.at(-1);
    if (last && last.seq + last.count - 1 > cut) last.count = cut - last.seq + 1;
  }

  /** The run that names record `seq`, if any. */
  find(seq: number): AttributeRun | undefined {
    const runs = this.runs;
    let lo = 0;
    let hi = runs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const run = runs[mid]!;
      if (seq < run.seq) hi = mid - 1;
      else if (seq >= run.seq + run.count) lo = mid + 1;
      else return run;
    }
    return undefined;
  }
}
