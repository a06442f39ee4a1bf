import type { LogFile, QueueDriver } from "../../core/driver";
import { decodeOutcome, type StoredOutcome } from "../../format/outcome";
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
  /** The id of the last event given (0: none yet). */
  lastId: number;

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
    const log = (this.#log ??= await this.#driver.openLog(this.#path, { create: false }));
    if (!log) return [];
    const size = await log.size();
    // Shorter than where it was: rewritten (or deleted and made again), read again from the start.
    if (size < this.#pos) await this.#reopen();
    const events = await this.#readFrom(size);
    if (events !== undefined) return events;
    // Not the next id where it was: rewritten and grown past that point.
    this.#pos = 0;
    return (await this.#readFrom(await (this.#log ?? log).size())) ?? [];
  }

  /** Events from `#pos` to `size`; undefined when the first frame there is not the one after `lastId` (rewritten). */
  async #readFrom(size: number): Promise<StoredOutcome[] | undefined> {
    const log = this.#log;
    if (!log || size <= this.#pos) return [];
    const from = this.#pos;
    const { frames, end } = readFrames(await log.read(from, size - from));
    const events: StoredOutcome[] = [];
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

  async #reopen(): Promise<void> {
    await this.#log?.close().catch(() => {});
    this.#log = await this.#driver.openLog(this.#path, { create: false });
    this.#pos = 0;
  }

  async close(): Promise<void> {
    await this.#log?.close().catch(() => {});
    this.#log = undefined;
  }
}
