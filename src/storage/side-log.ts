/**
 * An append-only file of checked frames, for v-queue's own side files of a queue (writer/delayed.ts,
 * writer/idempotency.ts): `u32 length | payload | u32 CRC-32 of length and payload`, little-endian.
 * A torn or damaged frame ends the reading and is cut off at open (as a part's torn tail), so
 * a frame is either whole or absent.
 *
 * Compaction writes the file anew with the log calls every driver has (cut to nothing, then one
 * append), and a crash or a storage failure in between (a Redis failover) would leave the file
 * empty: every idempotency key forgotten, and retries written twice. So the new content goes to
 * a journal first (`Q_info_idem_new`, one append ending in an END frame), then to the file, and
 * then the journal is removed. Open finishes what was cut short: a whole journal is written to
 * the file again unless the file starts with it; a journal without its END was cut before the
 * file was touched, and goes. The new content starts with a BEGIN frame of random bytes, so that
 * "the file starts with it" means this compaction's copy even when nothing else is kept (a
 * driver whose cut is several steps, unstorage's chunks, can leave any prefix of the old file).
 * Callers' payloads never start with a 0 byte; BEGIN's and END's do, and readers never see them.
 */
import { crc32Range } from "../format/crc32";
import type { DriverLock, LogFile, QueueDriver } from "../core/driver";
import { fencedLog, openFencedLog } from "./fence";
import { VQueueError, type QueueProblem } from "../core/errors";
import { sideJournalPath } from "./paths";

/** The journal's last frame (storage/side-log.ts, top): the copy before it is whole. */
const JOURNAL_END = Uint8Array.of(0, 0x45, 0x4e, 0x44);

/** The payload of a compacted file's first frame (storage/side-log.ts, top): "BEG" and 8 random bytes. */
function beginPayload(): Uint8Array {
  const payload = Uint8Array.of(0, 0x42, 0x45, 0x47, 0, 0, 0, 0, 0, 0, 0, 0);
  crypto.getRandomValues(payload.subarray(4));
  return payload;
}

/** A frame read back: its payload, and where that payload starts in the file. */
export interface Frame {
  payload: Uint8Array;
  at: number;
}

/** The frames of `bytes` up to the first bad one, and where the good ones end. */
export function readFrames(bytes: Uint8Array): { frames: Frame[]; end: number } {
  const frames: Frame[] = [];
  const end = forEachFrame(bytes, (start, stop) => frames.push({ payload: bytes.subarray(start, stop), at: start }));
  return { frames, end };
}

/**
 * Calls `visit` with where each frame's payload starts and ends in `bytes`, up to the first
 * bad frame; returns where the good ones end. Nothing is allocated per frame (a part's
 * attribute runs are a frame per produce call: a hundred thousand at a consumer's open).
 */
export function forEachFrame(bytes: Uint8Array, visit: (start: number, end: number) => void): number {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at, true);
    if (at + 8 + length > bytes.length) break;
    if (view.getUint32(at + 4 + length, true) !== crc32Range(bytes, at, at + 4 + length)) break;
    visit(at + 4, at + 4 + length);
    at += 8 + length;
  }
  return at;
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
  /** A compaction that failed: the file is left to the next open (`finishCompaction`). */
  #failed: unknown;

  private constructor(
    readonly driver: QueueDriver,
    readonly path: string,
    log: LogFile | undefined,
    size: number,
    readonly fence: DriverLock | undefined,
    readonly journalPath: string,
  ) {
    this.#log = log;
    this.#size = size;
  }

  /**
   * Opens the file, if there is one (it is made at the first append), reads every good frame,
   * and cuts off a damaged tail (reported). `fence`: the lock of the holder writing it.
   * `journalPath`: its compaction's copy, `<path>_new` unless a name of that shape could be
   * another file's (a consumer's outcome log: `Q_info_outc_C_new` would be consumer `C_new`'s).
   */
  static async open(
    driver: QueueDriver,
    path: string,
    queue: string,
    onProblem: (problem: QueueProblem) => void,
    fence?: DriverLock,
    journalPath = sideJournalPath(path),
  ): Promise<{ log: SideLog; frames: Frame[] }> {
    await finishCompaction(driver, path, fence, journalPath);
    const opened = await driver.openLog(path, { create: false });
    const log = opened && fence ? fencedLog(opened, fence) : opened;
    if (!log) return { log: new SideLog(driver, path, undefined, 0, fence, journalPath), frames: [] };
    try {
      const size = await log.size();
      const { frames, end } = readFrames(await log.read(0, size));
      if (end < size) {
        onProblem({ code: "TORN_TAIL", queue, message: `${size - end} bytes at the end of ${path} are no whole frame (a write cut short): cut off.` });
        await log.truncate(end);
      }
      // The compaction's own marks (a 0 byte first) are no caller's.
      return { log: new SideLog(driver, path, log, end, fence, journalPath), frames: frames.filter((f) => f.payload[0] !== 0) };
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
    return this.appendFramed(encodeFrames(payloads), sync);
  }

  /** Appends frames encoded already (`encodeFrames`' shape) in one write; returns where the first payload starts. */
  appendFramed(data: Uint8Array, sync: boolean): Promise<number> {
    return this.#serial(async () => {
      this.#assertWhole();
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
    this.#log = await openFencedLog(this.driver, this.path, this.fence);
    if (sync) await this.driver.syncDir?.(parentDir(this.path));
    return this.#log;
  }

  #serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(run);
    this.#queue = next.catch(() => {});
    return next;
  }

  /** Makes what was appended durable (in turn with the appends). */
  sync(): Promise<void> {
    return this.#serial(async () => this.#log?.sync());
  }

  read(at: number, length: number): Promise<Uint8Array> {
    return this.#log ? this.#log.read(at, length) : Promise.resolve(new Uint8Array(0));
  }

  /**
   * Replaces the whole file with these frames (compaction), then appends after them. Returns each
   * payload's new start. `framed`: whole frames after the payloads, as they are (a run of this
   * file's own, kept by the compaction: copied, not encoded again).
   */
  rewrite(payloads: readonly Uint8Array[], sync: boolean, framed?: Uint8Array): Promise<number[]> {
    return this.#serial(async () => {
      this.#assertWhole();
      try {
        return await this.#rewrite(payloads, sync, framed);
      } catch (error) {
        // The file may be cut or half written: nothing more goes to it (an append would land at a
        // wrong place, and be lost to the journal at the next open, which finishes the compaction).
        this.#failed = error;
        throw error;
      }
    });
  }

  #assertWhole(): void {
    if (this.#failed === undefined) return;
    const cause = this.#failed as Error;
    throw new VQueueError("E_IO", `${this.path} stopped after its compaction failed (${cause?.message ?? cause}); reopen the queue to recover.`, { cause });
  }

  async #rewrite(payloads: readonly Uint8Array[], sync: boolean, framed?: Uint8Array): Promise<number[]> {
    if (!this.#log && payloads.length === 0 && !framed?.length) return [];
    const log = await this.#file(sync);
    const begin = beginPayload();
    const head = encodeFrames([begin, ...payloads]);
    const end = encodeFrames([JOURNAL_END]);
    const length = head.length + (framed?.length ?? 0);
    // The file's content, then the journal's: the same bytes and its END (each frame encoded once).
    const journalBytes = new Uint8Array(length + end.length);
    journalBytes.set(head);
    if (framed) journalBytes.set(framed, head.length);
    journalBytes.set(end, length);
    const content = journalBytes.subarray(0, length);
    // The journal first (storage/side-log.ts, top): whole, and durable as asked, before the file is cut.
    const journalPath = this.journalPath;
    const journal = await openFencedLog(this.driver, journalPath, this.fence);
    try {
      await journal.truncate(0);
      await journal.append(0, journalBytes);
      if (sync) await journal.sync();
    } finally {
      await journal.close();
    }
    if (sync) await this.driver.syncDir?.(parentDir(journalPath));
    await log.truncate(0);
    await log.append(0, content);
    if (sync) await log.sync();
    this.#size = content.length;
    await this.driver.remove(journalPath, this.fence);
    const starts: number[] = [];
    let at = begin.length + 8;
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

/**
 * The frames of side file `path` as its holder has them, read without its lock and written to
 * never (for a listing by any instance): while a compaction runs, its whole journal is the content.
 */
export async function readSideFrames(driver: QueueDriver, path: string): Promise<Frame[]> {
  for (const [file, journal] of [
    [sideJournalPath(path), true],
    [path, false],
  ] as const) {
    const log = await driver.openLog(file, { create: false });
    if (!log) continue;
    try {
      const { frames } = readFrames(await log.read(0, await log.size()));
      // A journal without its END was cut before the file was touched: the file is the content.
      if (journal && !(frames.length > 0 && sameBytes(frames.at(-1)!.payload, JOURNAL_END))) continue;
      return frames.filter((f) => f.payload[0] !== 0);
    } finally {
      await log.close();
    }
  }
  return [];
}

/**
 * Finishes a compaction of `path` that a crash or a failed write cut short (storage/side-log.ts, top):
 * a whole journal is the file's content, written to it again; a journal without its END was cut
 * before the file was touched. Either way the journal goes. Nothing is lost, so nothing is reported.
 */
async function finishCompaction(driver: QueueDriver, path: string, fence: DriverLock | undefined, journalPath: string): Promise<void> {
  const journal = await driver.openLog(journalPath, { create: false });
  if (!journal) return;
  let whole: Uint8Array | undefined;
  try {
    const bytes = await journal.read(0, await journal.size());
    const last = readFrames(bytes).frames.at(-1);
    if (last && sameBytes(last.payload, JOURNAL_END)) whole = bytes.subarray(0, last.at - 4);
  } finally {
    await journal.close();
  }
  if (whole) {
    const log = await openFencedLog(driver, path, fence);
    try {
      // The file starts with the copy: it was written whole (only the journal's removal failed), and
      // what was appended after it stays. Else it was cut or half written: written again.
      if (!sameBytes(await log.read(0, Math.min(whole.length, await log.size())), whole)) {
        await log.truncate(0);
        await log.append(0, whole);
        await log.sync();
      }
    } finally {
      await log.close();
    }
  }
  await driver.remove(journalPath, fence);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}

function parentDir(path: string): string {
  return path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
}
