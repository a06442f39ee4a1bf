import type { LogFile, QueueDriver } from "../../core/driver";
import { decodeOutcome, MAX_OUTCOME_BYTES, outcomeHead, type StoredOutcome } from "../../format/outcome";

/** The longest frame an outcome log has: an event with an error and a value at their limits. */
const MAX_FRAME_BYTES = 2 * MAX_OUTCOME_BYTES + 1024;
import { readFrames } from "../../storage/side-log";

/**
 * Reads one outcome log (format/outcome.ts) as it grows, without its lock, in any process: each
 * `read` gives the events after the last one it gave (`lastId`). The holder may rewrite the file
 * (a compaction keeps the newest events, under the same ids): a file shorter than where the
 * reader was, or a frame there that is not the next id, means it was rewritten, and the reader
 * reads it again from the start, skipping the ids it gave. Events a compaction dropped before
 * they were read are not given (retention).
 */
export class OutcomeFileReader {
  readonly #driver: QueueDriver;
  readonly #path: string;
  #log: LogFile | undefined;
  #pos = 0;
  /** The first frame of the file as read at its start (`outcomeHead`), if it was. */
  #first: { id: number; at: number } | { next: number } | undefined;
  /** Whether a file was open before (one opened now is then maybe another log). */
  #opened = false;
  /** The id of the last event given (0: none yet). */
  lastId: number;
  /** Set by a `read` that found another log in the file's place (deleted and made again): ids started over. */
  restarted = false;

  constructor(driver: QueueDriver, path: string, lastId = 0) {
    this.#driver = driver;
    this.#path = path;
    this.lastId = lastId;
  }

  /** Skips every event in the file now: `read` gives only those written later. */
  async skipToEnd(): Promise<void> {
    const events = await this.read();
    if (events.length > 0) this.lastId = events.at(-1)!.id;
  }

  /** The events written since the last read (none when the file is not there). */
  async read(): Promise<StoredOutcome[]> {
    // Another file in its place than the one open (fs: deleted and made again, while the handle
    // still reads the old one): the path is shorter than the handle. The handle's size first: an
    // append between the two looks makes the path longer, never shorter.
    if (this.#log && this.#driver.sizeOf) {
      const open = await this.#log.size();
      const there = await this.#driver.sizeOf(this.#path);
      if (there === undefined || there < open) await this.#close();
      // Gone (a compaction never removes it): the consumer was deleted, and a log made later starts over.
      if (there === undefined) this.#restart();
    }
    if (!this.#log) {
      this.#log = await this.#driver.openLog(this.#path, { create: false });
      if (!this.#log) return [];
      this.#pos = 0;
      // Opened again (not the first time: a cursor given names this log's ids).
      if (this.#opened) await this.#checkLineage();
      this.#opened = true;
    }
    const log = this.#log;
    const size = await log.size();
    // Shorter than where it was: compacted (or made again, on a driver without handles), read again from the start.
    if (size < this.#pos) {
      this.#pos = 0;
      await this.#checkLineage();
    }
    const events = await this.#readFrom(size);
    if (events !== undefined) return events;
    // Not the next id where it was: rewritten (or made again) and grown past that point.
    this.#pos = 0;
    await this.#checkLineage();
    return (await this.#readFrom(await log.size())) ?? [];
  }

  /** Events from `#pos` to `size`; undefined when the first frame there is not the one after `lastId` (rewritten). */
  async #readFrom(size: number): Promise<StoredOutcome[] | undefined> {
    const log = this.#log;
    if (!log || size <= this.#pos) return [];
    const from = this.#pos;
    const { frames, end } = readFrames(await log.read(from, size - from));
    const events: StoredOutcome[] = [];
    if (from === 0) {
      // The file's first frame: what tells this file from another at its path later.
      const payload = frames.find((f) => f.payload[0] !== 0)?.payload;
      this.#first = payload && outcomeHead(payload);
    }
    for (const { payload } of frames) {
      const event = payload[0] === 0 ? undefined : decodeOutcome(payload);
      if (!event || "next" in event) continue;
      if (from > 0 && events.length === 0 && this.lastId > 0 && event.id !== this.lastId + 1 && event.id > this.lastId) return undefined;
      if (event.id <= this.lastId) continue;
      events.push(event);
      this.lastId = event.id;
    }
    // A damaged frame right where it was (and nothing whole after it): rewritten under it, or a torn tail the holder cuts.
    if (from > 0 && end === 0 && size - from >= 8 && frames.length === 0) return undefined;
    this.#pos = from + end;
    return events;
  }

  /** Read from the start again: a log that is not the one read so far (`#madeAgain`) starts the ids over. */
  async #checkLineage(): Promise<void> {
    if (await this.#madeAgain()) this.#restart();
  }

  /**
   * Whether the file is another log than the one read so far: its first frame differs from the
   * one read at its start, unless it is a compaction of this log since (a NEXT past every id
   * given). A reader that never read the start cannot tell, and takes it for the same log: a
   * size that looks shorter for a moment (unstorage, read from another instance) must not make
   * it give every event again.
   */
  async #madeAgain(): Promise<boolean> {
    const first = this.#first;
    if (!this.#log || this.lastId === 0 || !first) return false;
    // A compaction's file starts with the side log's BEGIN mark, then its NEXT frame.
    const payload = (await this.#firstFrames(2)).find((p) => p[0] !== 0);
    const head = payload && outcomeHead(payload);
    if (!head) return false;
    if ("next" in head) return head.next <= this.lastId && !("next" in first && first.next === head.next);
    return "next" in first || first.id !== head.id || first.at !== head.at;
  }

  #restart(): void {
    this.lastId = 0;
    this.restarted = true;
  }

  /** The payloads of the file's first `count` frames (fewer when it has fewer whole ones). */
  async #firstFrames(count: number): Promise<Uint8Array[]> {
    const payloads: Uint8Array[] = [];
    let at = 0;
    while (payloads.length < count && this.#log) {
      const head = await this.#log.read(at, 4);
      if (head.length < 4) break;
      const length = new DataView(head.buffer, head.byteOffset, 4).getUint32(0, true);
      if (length > MAX_FRAME_BYTES) break; // no frame of this log is that long: damaged
      const { frames } = readFrames(await this.#log.read(at, 8 + length));
      if (frames.length === 0) break;
      payloads.push(frames[0]!.payload);
      at += 8 + length;
    }
    return payloads;
  }

  async #close(): Promise<void> {
    await this.#log?.close().catch(() => {});
    this.#log = undefined;
  }

  close(): Promise<void> {
    return this.#close();
  }
}
