// Over 300 lines: one class that follows a consumer through the parts; reading a part, moving
// to the next (deleted parts included), holding at a torn tail and v3 decoding share its
// position, limit and open files. Whether the writer has moved on is newer-part.ts's.
import { comparePositions, formatCursor, type ConsumerPosition } from "../format/position";
import type { LogFile, QueueDriver, RecordFile } from "../core/driver";
import { VQueueError, type QueueProblem } from "../core/errors";
import { openSharedLog, openSharedRecord } from "../storage/handles";
import type { ChangeHint } from "../storage/hub";
import { queueHub } from "../storage/hub";
import { parsePushInfo } from "../format/info";
import type { Message } from "../format/message";
import { partDir, partPath, pushInfoPath } from "../storage/paths";
import { isRecordBoundary } from "./position-check";
import { HEADER_SIZE } from "../format/record";
import { PartDecoder } from "../compression/part-codec";
import { isWriterGone, listParts, readInfoLine } from "./recovery";
import { scanPart, type ChunkCache } from "./scan";
import { reportMissed } from "./missed";
import { NewerPartCheck } from "./newer-part";
import type { ZstdLoader } from "../compression/zstd";

// Bodies are bytes: a leading U+FEFF is part of the message, not a byte-order mark to drop.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** What a read took: `out`, of which the first `passed` are behind the reader's position. */
interface Taken {
  out: Message[];
  passed: number;
}

export interface PartReaderOptions {
  onProblem: (problem: QueueProblem) => void;
  readChunkBytes: number;
  zstd: ZstdLoader;
}

/**
 * Follows a queue's parts for one consumer: where the next record is, how far the current
 * part can be read, and the move to the next part. Not safe for concurrent calls: its owner
 * runs them one at a time (they swap file handles).
 */
export class PartReader {
  readonly #queue: string;
  readonly #consumer: string;
  readonly #driver: QueueDriver;
  readonly #options: PartReaderOptions;

  /** Next record to hand out. */
  #read: ConsumerPosition = { part: 0, position: 0, count: 0 };
  /** Bytes of the reading part known to be complete. */
  #limit = 0;
  /** `#limit` is the part file's size (its writer is gone), not a writer's info line. */
  #limitFromFile = false;
  /** The reading part is no longer the writer's current part: it ends at its file size. */
  #finished = false;
  /** An incomplete record at the end of a part whose writer is gone: reported once, never passed. */
  #tail: { at: number; size: number } | undefined;
  // Shared with the writer and the other consumers in this process (storage/handles.ts).
  #partFile: LogFile | undefined;
  #pushInfoFile: RecordFile | undefined;
  /** Whether the writer has moved past the reading part. */
  readonly #newerPart: NewerPartCheck;
  /** The last chunk read from the reading part: most reads are served from it. */
  #cache: ChunkCache = { buf: undefined, pos: 0 };
  /** The reading part's dictionary, opened at its first compressed record (v3). */
  #decoder: PartDecoder | undefined;
  /** The reading part's push info line was found unparseable (reported once). */
  #infoDamaged = false;

  constructor(queue: string, consumer: string, driver: QueueDriver, options: PartReaderOptions) {
    this.#queue = queue;
    this.#consumer = consumer;
    this.#driver = driver;
    this.#options = options;
    this.#newerPart = new NewerPartCheck(driver, queue);
  }

  get position(): ConsumerPosition {
    return { ...this.#read };
  }

  /** The reading part and how many of its bytes are known to be complete (records written whole before this was known). */
  get knownEnd(): { part: number; bytes: number } {
    return { part: this.#read.part, bytes: this.#limit };
  }

  /** Whether bytes known to be complete are left in the current part (no I/O). */
  get hasBuffered(): boolean {
    return this.#read.position < this.#limit;
  }

  /** Directories whose changes may mean more to read (for a storage watch). */
  get watchDirs(): string[] {
    return [partDir(this.#queue, this.#read.part), ""];
  }

  /** Points the reader at `position`, opening its part's files (before closing the old ones). */
  async openAt(position: ConsumerPosition): Promise<void> {
    const old = [this.#partFile, this.#pushInfoFile];
    this.#partFile = this.#pushInfoFile = undefined;
    try {
      this.#partFile = await openSharedLog(this.#driver, partPath(this.#queue, position.part), { create: false });
      this.#pushInfoFile = this.#partFile && (await openSharedRecord(this.#driver, pushInfoPath(this.#queue, position.part), { create: false }));
    } finally {
      await Promise.all(old.map((file) => file?.close()));
    }
    if (this.#read.part !== position.part) this.#dropDecoder();
    this.#read = { ...position };
    this.#cache = { buf: undefined, pos: 0 };
    this.#infoDamaged = false;
    this.#limit = 0;
    this.#limitFromFile = false;
    this.#tail = undefined;
    this.#newerPart.reset();
    this.#finished = !this.#partFile; // a missing part reads as empty
  }

  /**
   * Points the reader at `position`, the start of a record of the part it reads: what it knows
   * of that part (its complete bytes, its last chunk) is kept, so a reader that jumps between
   * records of one part (consumers/shared/priority.ts) reads no file but the part. Another
   * part (or none open): `openAt`.
   */
  async moveTo(position: ConsumerPosition): Promise<void> {
    if (position.part !== this.#read.part || !this.#partFile) return this.openAt(position);
    this.#read = { ...position };
  }

  /**
   * The next records, oldest first, up to `max` or `maxBytes` (at least one); [] when nothing new
   * is known. `keepOnError` (a consumer's read): a failure after some were taken answers those.
   */
  async read(max: number, maxBytes: number, decode: boolean, keepOnError = true): Promise<Message[]> {
    const taken: Taken = { out: [], passed: 0 };
    try {
      await this.#readInto(taken, max, maxBytes, decode);
    } catch (error) {
      if (!keepOnError) throw error;
      // The position is past the first `passed` already: a failure while looking for more (the
      // storage down, say) must not take them with it, or nobody would ever get them. Those of
      // a scan cut short are read again.
      if (taken.passed === 0) throw error;
      taken.out.length = taken.passed;
    }
    return taken.out;
  }

  async #readInto(taken: Taken, max: number, maxBytes: number, decode: boolean): Promise<void> {
    const { out } = taken;
    let bytes = 0;
    for (;;) {
      if (this.#read.position >= this.#limit && !(this.localEdge() ?? (await this.refresh()))) return;
      const part = this.#read.part;
      let count = this.#read.count;
      // With no writer left, a damaged end of the part may be a torn write: stop before it.
      const holdAtTail = this.#limitFromFile && !this.#finished;
      let tailAt: number | undefined;
      let needDecoder: number | undefined;
      const partDecoder = this.#decoder;
      const skips: [offset: number, bytes: number][] = [];
      const result = await scanPart(
        this.#partFile!,
        {
          from: this.#read.position,
          limit: this.#limit,
          chunkSize: this.#options.readChunkBytes,
          cache: this.#cache,
          onSkip: (offset, skipped) => {
            if (holdAtTail && offset + skipped >= this.#limit) return void (tailAt = offset);
            skips.push([offset, skipped]);
          },
        },
        (buf, _view, at, header) => {
          const start = at + HEADER_SIZE;
          let body = new Uint8Array(buf.buffer, buf.byteOffset + start, header.length);
          if (header.compressed) {
            // The dictionary is opened (I/O) between scans: stop before this record, come back.
            if (!partDecoder) {
              needDecoder = header.offset;
              return false;
            }
            const decoded = partDecoder.decode(body);
            if ("problem" in decoded) {
              this.#report(
                decoded.problem,
                part,
                header.offset,
                HEADER_SIZE + header.length,
                `skipped record ${header.seq} at offset ${header.offset} of part ${part}: ${decoded.why}.`,
              );
              count = header.seq;
              return true;
            }
            body = decoded.body;
          }
          // Plain views, no copy: chunks are never reused or written to, so a view stays
          // valid (it keeps its chunk alive while referenced).
          const data = decode && header.type === "string" ? decoder.decode(body) : body;
          const message: Message = { part, offset: header.offset, seq: header.seq, type: header.type, data, size: body.length, crc: header.crc };
          if (header.compressed) message.stored = header.length;
          out.push(message);
          bytes += body.length;
          count = header.seq;
          return out.length < max && bytes < maxBytes;
        },
      );
      if (tailAt !== undefined) {
        await this.#holdAtTail(part, tailAt, count);
        return;
      }
      if (skips.length > 0 && !(await listParts(this.#driver, this.#queue)).includes(part)) {
        // Not damage: retention deleted the part under this reader (unstorage drops its chunks). On from the next part.
        this.#read = { part, position: skips[0]![0], count };
        taken.passed = out.length;
        this.#limit = this.#read.position;
        this.#finished = true;
        continue;
      }
      for (const [offset, skipped] of skips)
        this.#report("BAD_RECORD", part, offset, skipped, `skipped ${skipped} damaged bytes at offset ${offset} of part ${part}.`);
      if (needDecoder !== undefined) {
        this.#read = { part, position: needDecoder, count };
        taken.passed = out.length;
        const opened = await PartDecoder.open(this.#driver, this.#queue, part, this.#options.zstd);
        if (!opened.dictionary && !(await listParts(this.#driver, this.#queue)).includes(part)) {
          // Retention deleted the part, its dictionary with it, before this reader needed it: missed, not damage.
          this.#limit = needDecoder;
          this.#finished = true;
          continue;
        }
        this.#decoder = opened;
        continue;
      }
      this.#read = { part, position: result.next, count };
      taken.passed = out.length;
      // With room left, go on: the part may have grown, or the next part may hold more.
      if (result.stopped) return;
    }
  }

  /** Takes a hint of the writer in this process: readable up to its edge at once, its bytes kept. */
  applyHint(hint: ChangeHint): void {
    if (hint.part !== this.#read.part || this.#finished) return;
    if (hint.edge > this.#limit) this.#limit = hint.edge;
    const tail = hint.tail;
    if (tail && this.#read.position >= tail.start && this.#read.position < hint.edge) this.#cache = { buf: tail.data, pos: tail.start };
  }

  /**
   * Whether there is more to read, from what the writer in this process last announced (no
   * I/O); undefined when that does not tell (no writer here, or it is on another part).
   */
  localEdge(): boolean | undefined {
    const edge = queueHub(this.#driver, this.#queue).writerEdge;
    if (!edge || this.#finished || edge.part !== this.#read.part) return undefined;
    if (edge.edge > this.#limit) {
      this.#limit = edge.edge;
      this.#limitFromFile = false;
    }
    return this.#read.position < this.#limit;
  }

  /**
   * Learns whether more can be read: the part grew, or a newer part exists. Cheap while a
   * writer lives: two small reads. Once the writer is gone the part files are the truth:
   * records past a lagging info line, and parts the queue line does not name, are found.
   */
  async refresh(): Promise<boolean> {
    const part = this.#read.part;
    let gone: boolean | undefined;
    const writerGone = async () => (gone ??= await isWriterGone(this.#driver, this.#queue));
    if (!this.#finished) {
      const file = this.#partFile!;
      const line =
        this.#pushInfoFile &&
        (await readInfoLine(
          () => this.#pushInfoFile!.read(),
          (text) => parsePushInfo(text, this.#queue),
        ));
      const push = line?.value;
      if (line?.damaged && !this.#infoDamaged) {
        // A hint that is missing, not a failure (a v3 line of the crate 0.3.x may look so): the part file says where it ends.
        this.#infoDamaged = true;
        this.#report(
          "BAD_INFO",
          part,
          0,
          0,
          `cannot parse the push info line of part ${part} (a crate 0.3.x v3 line?); reading that part up to the end of its file.`,
        );
      }
      // While the file is read to its end (no writer), a lagging line says nothing new; a new writer's does.
      if (push && push.edge > this.#limit && (!this.#limitFromFile || !(await writerGone()))) {
        this.#limit = push.edge;
        this.#limitFromFile = false;
        if (this.#limit > this.#read.position) return true;
      }
      if (await this.#newerPart.exists(part, writerGone)) {
        // The writer has moved on: this part ends at its file size (its last records included).
        this.#finished = true;
        this.#limitFromFile = false;
        this.#limit = await file.size();
        if (this.#limit > this.#read.position) return true;
      } else {
        const size = await file.size();
        if (size <= this.#limit || (this.#tail?.at === this.#read.position && this.#tail.size === size)) return false;
        if (!this.#infoDamaged && !(await writerGone())) return false;
        // Bytes past the info line, and no writer to finish them: the file says what is there.
        this.#limit = size;
        this.#limitFromFile = true;
        return this.#limit > this.#read.position;
      }
    }
    const ids = await listParts(this.#driver, this.#queue);
    const next = ids.find((id) => id > part);
    if (next === undefined) return false;
    // Parts deleted by retention before this consumer was done with them: said, never silent.
    if (next > part + 1 || !ids.includes(part)) await reportMissed(this.#driver, this.#queue, this.#consumer, this.#read, next, this.#options.onProblem);
    await this.openAt({ part: next, position: 0, count: 0 });
    return this.refresh();
  }

  /** Moves forward to a cursor from outside, checked to name the end of a record that exists. */
  async skipTo(target: ConsumerPosition): Promise<void> {
    if (comparePositions(target, this.#read) <= 0) return;
    const samePart = target.part === this.#read.part;
    const file = samePart ? this.#partFile : await openSharedLog(this.#driver, partPath(this.#queue, target.part), { create: false });
    try {
      const from = samePart ? this.#read : { part: target.part, position: 0, count: 0 };
      if (!file || !(await isRecordBoundary(file, from, target))) {
        throw new VQueueError(
          "E_CURSOR",
          `Cannot commit ${formatCursor(target)}: it names no message end of queue "${this.#queue}" at or before what exists (consumer "${this.#consumer}" is at ${formatCursor(this.#read)}).`,
        );
      }
    } finally {
      if (!samePart) await file?.close();
    }
    if (!samePart) return this.openAt(target);
    this.#read = { ...target };
    if (this.#limit < target.position) this.#limit = target.position;
  }

  async close(): Promise<void> {
    const files = [this.#partFile, this.#pushInfoFile];
    this.#partFile = this.#pushInfoFile = undefined;
    this.#dropDecoder();
    await Promise.all([...files.map((file) => file?.close()), this.#newerPart.close()]);
  }

  // --- Internals ---

  /** Stops before the incomplete end of a part whose writer is gone, and says so once. */
  async #holdAtTail(part: number, at: number, count: number): Promise<void> {
    const size = this.#limit;
    this.#read = { part, position: at, count };
    this.#limit = at;
    // The chunk read holds the torn bytes, which the next writer replaces: never serve them again.
    this.#cache = { buf: undefined, pos: 0 };
    if (this.#tail?.at === at && this.#tail.size === size) return;
    this.#tail = { at, size };
    this.#report(
      "TORN_TAIL",
      part,
      at,
      size - at,
      `stops before ${size - at} bytes at the end of part ${part} (offset ${at}) that are no whole record; its writer is gone (a torn write). The next writer cuts them off.`,
    );
  }

  #dropDecoder(): void {
    this.#decoder?.free();
    this.#decoder = undefined;
  }

  #report(code: QueueProblem["code"], part: number, offset: number, bytes: number, what: string): void {
    this.#options.onProblem({ code, queue: this.#queue, part, offset, bytes, message: `Consumer "${this.#consumer}" ${what}` });
  }
}
