/**
 * An append-only file of checked frames, for v-queue's own side files of a queue (delayed.ts,
 * idempotency.ts): `u32 length | payload | u32 CRC-32 of length and payload`, little-endian.
 * A torn or damaged frame ends the reading and is cut off at open (as a part's torn tail), so
 * a frame is either whole or absent. Compaction writes the file anew through the log itself
 * (cut to nothing, then one append), as pruned.ts does: every driver's log can, and a crash in
 * between leaves a prefix of the frames. Callers compact only what they can afford to lose so.
 */
import { crc32Range } from "./crc32";
import type { DriverLock, LogFile, QueueDriver } from "./driver";
import { fencedLog } from "./fence";
import type { QueueProblem } from "./errors";

/** A frame read back: its payload, and where that payload starts in the file. */
export interface Frame {
  payload: Uint8Array;
  at: number;
}

/** The frames of `bytes` up to the first bad one, and where the good ones end. */
export function readFrames(bytes: Uint8Array): { frames: Frame[]; end: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frames: Frame[] = [];
  let at = 0;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at, true);
    if (at + 8 + length > bytes.length) break;
    if (view.getUint32(at + 4 + length, true) !== crc32Range(bytes, at, at + 4 + length)) break;
    frames.push({ payload: bytes.subarray(at + 4, at + 4 + length), at: at + 4 });
    at += 8 + length;
  }
  return { frames, end: at };
}

/** Frames around payloads, in one buffer (one append). */
export function encodeFrames(payloads: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(payloads.reduce((sum, p) => sum + p.length + 8, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const p of payloads) {
    view.setUint32(at, p.length, true);
    out.set(p, at + 4);
    view.setUint32(at + 4 + p.length, crc32Range(out, at, at + 4 + p.length), true);
    at += 8 + p.length;
  }
  return out;
}

/** A side file open for appending; `frames` are what was in it at open. */
export class SideLog {
  /** Undefined until the first append makes the file: a queue that never uses it has none. */
  #log: LogFile | undefined;
  #size: number;
  /** Appends and rewrites one after another: each appends where the one before ended. */
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly driver: QueueDriver,
    readonly path: string,
    log: LogFile | undefined,
    size: number,
    readonly fence: DriverLock | undefined,
  ) {
    this.#log = log;
    this.#size = size;
  }

  /**
   * Opens the file, if there is one (it is made at the first append), reads every good frame,
   * and cuts off a damaged tail (reported). `fence`: the lock of the holder writing it.
   */
  static async open(driver: QueueDriver, path: string, queue: string, onProblem: (problem: QueueProblem) => void, fence?: DriverLock): Promise<{ log: SideLog; frames: Frame[] }> {
    const opened = await driver.openLog(path, { create: false });
    const log = opened && fence ? fencedLog(opened, fence) : opened;
    if (!log) return { log: new SideLog(driver, path, undefined, 0, fence), frames: [] };
    try {
      const size = await log.size();
      const { frames, end } = readFrames(await log.read(0, size));
      if (end < size) {
        onProblem({ code: "TORN_TAIL", queue, message: `${size - end} bytes at the end of ${path} are no whole frame (a write cut short): cut off.` });
        await log.truncate(end);
      }
      return { log: new SideLog(driver, path, log, end, fence), frames };
    } catch (error) {
      await log.close();
      throw error;
    }
  }

  get size(): number {
    return this.#size;
  }

  /** Appends frames in one write; returns where the first payload starts. */
  append(payloads: readonly Uint8Array[], sync: boolean): Promise<number> {
    const data = encodeFrames(payloads);
    return this.#serial(async () => {
      const log = await this.#file(sync);
      const at = this.#size;
      await log.append(at, data);
      this.#size += data.length;
      if (sync) await log.sync();
      return at + 4;
    });
  }

  /** The file, made now if it is not there yet (its directory entry synced with `sync`, so that it outlives a power cut). */
  async #file(sync: boolean): Promise<LogFile> {
    if (this.#log) return this.#log;
    const log = (await this.driver.openLog(this.path, { create: true }))!;
    this.#log = this.fence ? fencedLog(log, this.fence) : log;
    if (sync) await this.driver.syncDir?.("");
    return this.#log;
  }

  #serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(run);
    this.#queue = next.catch(() => {});
    return next;
  }

  read(at: number, length: number): Promise<Uint8Array> {
    return this.#log ? this.#log.read(at, length) : Promise.resolve(new Uint8Array(0));
  }

  /** Replaces the whole file with these frames (compaction), then appends after them. Returns each payload's new start. */
  rewrite(payloads: readonly Uint8Array[], sync: boolean): Promise<number[]> {
    return this.#serial(() => this.#rewrite(payloads, sync));
  }

  async #rewrite(payloads: readonly Uint8Array[], sync: boolean): Promise<number[]> {
    const data = encodeFrames(payloads);
    if (!this.#log && data.length === 0) return [];
    const log = await this.#file(sync);
    await log.truncate(0);
    if (data.length > 0) await log.append(0, data);
    if (sync) await log.sync();
    this.#size = data.length;
    const starts: number[] = [];
    let at = 0;
    for (const p of payloads) {
      starts.push(at + 4);
      at += p.length + 8;
    }
    return starts;
  }

  close(): Promise<void> {
    return this.#serial(async () => this.#log?.close());
  }
}

/** Little-endian fields one after another (payloads of side files). */
export class FieldWriter {
  #parts: Uint8Array[] = [];
  #size = 0;

  #push(bytes: Uint8Array): this {
    this.#parts.push(bytes);
    this.#size += bytes.length;
    return this;
  }

  u8(value: number): this {
    return this.#push(Uint8Array.of(value));
  }

  u32(value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, value, true);
    return this.#push(b);
  }

  /** A number exactly (ids, times, positions: all below 2^53). */
  f64(value: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, value, true);
    return this.#push(b);
  }

  /** u32 length, then the bytes. */
  bytes(value: Uint8Array): this {
    return this.u32(value.length).#push(value);
  }

  done(): Uint8Array {
    const out = new Uint8Array(this.#size);
    let at = 0;
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/** Reads what `FieldWriter` wrote, in the same order. */
export class FieldReader {
  #view: DataView;
  at = 0;

  constructor(readonly buf: Uint8Array) {
    this.#view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }

  u8(): number {
    return this.#view.getUint8(this.at++);
  }

  u32(): number {
    const v = this.#view.getUint32(this.at, true);
    this.at += 4;
    return v;
  }

  f64(): number {
    const v = this.#view.getFloat64(this.at, true);
    this.at += 8;
    return v;
  }

  bytes(): Uint8Array {
    const length = this.u32();
    const v = this.buf.subarray(this.at, this.at + length);
    this.at += length;
    return v;
  }
}
