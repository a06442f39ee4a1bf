import { comparePositions, formatCursor, parseCursor, positionAfter, type ConsumerPosition } from "./cursor";
import type { DriverLock, FileHandle, QueueDriver } from "./driver";
import { VQueueError } from "./errors";
import { openShared } from "./handles";
import { formatPopInfo, parsePopInfo, parsePushInfo, parseQueueInfo } from "./info";
import { consumerLag } from "./inspect";
import type { Message } from "./message";
import { assertName } from "./names";
import { hasLocalWriter, localWriterEdge, onQueueChange, queueKey } from "./notify";
import { checkInteger, resolveConsumerOptions, type ConsumerOptions, type ResolvedConsumerOptions } from "./options";
import { consumerLockPath, partDir, partPath, popInfoPath, pushInfoPath, queueInfoPath } from "./paths";
import { checkSavedPosition, isRecordBoundary, readPartEnd } from "./position";
import { HEADER_SIZE } from "./record";
import { isV3Record, isWriterGone, listParts, readInfoLine, readQueueInfo } from "./recovery";
import { scanPart, type ChunkCache } from "./scan";

export interface ReadOptions {
  /** Most messages to return. @default 100 */
  max?: number;
  /** Stop once the bodies add up to this many bytes (at least one message is returned). @default 1048576 */
  maxBytes?: number;
  /**
   * Hand text (`S`) bodies out as their UTF-8 bytes, undecoded (`type` still says "string"):
   * for callers that pass bodies on as bytes, e.g. a binary HTTP response.
   * @default false
   */
  raw?: boolean;
}

export interface WaitOptions {
  signal?: AbortSignal;
  /** Give up after this long; `wait` then resolves false. @default no limit */
  timeoutMs?: number;
}

export interface IterateOptions extends ReadOptions {
  signal?: AbortSignal;
  /**
   * Commit as the loop goes: a batch is committed once the loop body has finished with all
   * of it, and on `break` (or a throw) everything before the message in hand is committed,
   * so that message comes again (at-least-once).
   * @default true
   */
  autoCommit?: boolean;
}

// Bodies are bytes: a leading U+FEFF is part of the message, not a byte-order mark to drop.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const ascii = new TextEncoder();
const INFO_READ = 256;
/** At most one directory listing a second looks for parts that a dead writer's queue line does not name. */
const DIR_CHECK_MS = 1000;

/**
 * A named reader of a queue with a saved position (`Q_info_pop_C`). Any number of consumers
 * read one queue, each at its own pace; one open reader per consumer name at a time.
 * (Over 300 lines: one class whose read, wait, commit and refresh share its state.)
 */
export class QueueConsumer {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedConsumerOptions;
  readonly #driver: QueueDriver;
  readonly #lock: DriverLock;
  readonly #key: string;

  /** Next record to hand out. */
  #read: ConsumerPosition = { part: 0, position: 0, count: 0 };
  #committed: ConsumerPosition = { part: 0, position: 0, count: 0 };
  /** Bytes of the reading part known to be complete. */
  #limit = 0;
  /** `#limit` is the part file's size (its writer is gone), not a writer's info line. */
  #limitFromFile = false;
  /** The reading part is no longer the writer's current part: it ends at its file size. */
  #finished = false;
  /** An incomplete record at the end of a part whose writer is gone: reported once, never passed. */
  #tail: { at: number; size: number } | undefined;
  #dirCheckedAt = 0;
  // Shared with the writer and the other consumers in this process (handles.ts).
  #partFile: FileHandle | undefined;
  #pushInfoFile: FileHandle | undefined;
  #queueInfoFile: FileHandle | undefined;
  #commitChain: Promise<void> = Promise.resolve();
  /** Reads, refreshes and moves of the reading part, one at a time (they swap file handles). */
  #serial: Promise<unknown> = Promise.resolve();
  /** The last chunk read from the reading part: most reads are served from it. */
  #cache: ChunkCache = { buf: undefined, pos: 0 };
  #closed = false;

  private constructor(queue: string, name: string, options: ResolvedConsumerOptions, lock: DriverLock) {
    this.queue = queue;
    this.name = name;
    this.options = options;
    this.#driver = options.driver;
    this.#lock = lock;
    this.#key = queueKey(this.#driver.storageKey, queue);
  }

  /** Opens (and by default creates) consumer `name` of `queue`; takes the consumer's lock. */
  static async open(queue: string, name: string, options: ConsumerOptions = {}): Promise<QueueConsumer> {
    assertName(queue, "queue");
    assertName(name, "consumer", queue);
    const resolved = resolveConsumerOptions(options);
    const lock = await resolved.driver.lock(consumerLockPath(queue, name));
    if (!lock) {
      throw new VQueueError("E_LOCKED", `Consumer "${name}" of queue "${queue}" is already open (in this or another process). One reader per consumer name.`);
    }
    const consumer = new QueueConsumer(queue, name, resolved, lock);
    try {
      await consumer.#init();
    } catch (error) {
      await consumer.#closeFiles().catch(() => {});
      await lock.release().catch(() => {});
      throw error;
    }
    return consumer;
  }

  /** Where the next `read` starts. */
  get position(): ConsumerPosition {
    return { ...this.#read };
  }

  /** The saved position: where a reopened consumer resumes. */
  get committed(): ConsumerPosition {
    return { ...this.#committed };
  }

  /** The cursor that commits everything handed out so far. */
  get cursor(): string {
    return formatCursor(this.#read);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Returns the next messages, oldest first, or [] when there is nothing new (it does not
   * wait: see `wait` and `messages`). Damaged records are reported and skipped.
   */
  async read(options: ReadOptions = {}): Promise<Message[]> {
    this.#assertOpen();
    const max = options.max ?? 100;
    const maxBytes = options.maxBytes ?? 1024 * 1024;
    checkInteger("max", max, 1, 1_000_000);
    checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
    return this.#exclusive(() => this.#readNow(max, maxBytes, !options.raw));
  }

  /**
   * Resolves true as soon as new messages may be there, false on timeout or abort.
   * In the writer's process it is woken by the write and costs no I/O while idle; otherwise
   * it re-reads the small info files every `pollIntervalMs` (and uses the driver's watch).
   */
  async wait(options: WaitOptions = {}): Promise<boolean> {
    this.#assertOpen();
    const { signal, timeoutMs } = options;
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, 2 ** 31 - 1);
    if (signal?.aborted) return false;
    let changed = false;
    let wake: ((value: boolean) => void) | undefined;
    // Listen before checking, so a write between the check and the wait is not missed.
    const off = onQueueChange(this.#key, (hint) => {
      // Written and announced by the writer in this process: readable up to its edge now.
      if (hint && hint.part === this.#read.part && !this.#finished) {
        if (hint.edge > this.#limit) this.#limit = hint.edge;
        const tail = hint.tail;
        if (tail && this.#read.position >= tail.start && this.#read.position < hint.edge) this.#cache = { buf: tail.data, pos: tail.start };
      }
      changed = true;
      wake?.(true);
    });
    try {
      if (this.#read.position < this.#limit || (this.#localEdge() ?? (await this.#exclusive(() => this.#refresh()))) || changed) return true;
      if (timeoutMs === 0) return false;
      return await new Promise<boolean>((resolve) => {
        const cleanups: (() => void)[] = [];
        wake = (value) => {
          for (const cleanup of cleanups) cleanup();
          resolve(value);
        };
        if (timeoutMs !== undefined) {
          const timer = setTimeout(() => wake!(false), timeoutMs);
          cleanups.push(() => clearTimeout(timer));
        }
        if (signal) {
          if (signal.aborted) return wake!(false);
          const onAbort = () => wake!(false);
          signal.addEventListener("abort", onAbort, { once: true });
          cleanups.push(() => signal.removeEventListener("abort", onAbort));
        }
        if (!hasLocalWriter(this.#key)) this.#watchStorage(cleanups, () => wake!(true));
      });
    } finally {
      off();
    }
  }

  /**
   * Saves the position: after everything handed out, or after the given message or cursor.
   * Idempotent; a position at or before the saved one is a no-op. A cursor past what this
   * consumer handed out (one from an earlier process) is taken when it names the end of a
   * record that exists; reading then goes on from there.
   */
  commit(upTo?: Message | string): Promise<void> {
    let target: ConsumerPosition;
    try {
      this.#assertOpen();
      target = upTo === undefined ? { ...this.#read } : typeof upTo === "string" ? parseCursor(upTo) : positionAfter(upTo);
    } catch (error) {
      return Promise.reject(error);
    }
    const ahead = comparePositions(target, this.#read) > 0;
    const run = this.#commitChain.then(async () => {
      if (ahead) await this.#exclusive(() => this.#skipTo(target));
      await this.#savePosition(target);
    });
    this.#commitChain = run.catch(() => {});
    return run;
  }

  /** Hands out again everything after the saved position (e.g. after a failed batch). */
  async rewind(): Promise<void> {
    this.#assertOpen();
    await this.#commitChain;
    await this.#exclusive(() => this.#openPart(this.#committed));
  }

  /**
   * Messages as an async iterator that waits for new ones, until `signal` aborts or the
   * loop breaks. Commits as it goes unless `autoCommit: false` (see `IterateOptions`).
   */
  async *messages(options: IterateOptions = {}): AsyncGenerator<Message, void, undefined> {
    const { signal, autoCommit = true, ...readOptions } = options;
    let inHand: Message | undefined;
    let done: Message | undefined;
    try {
      while (!signal?.aborted) {
        const batch = await this.read(readOptions);
        if (batch.length === 0) {
          await this.wait({ signal });
          continue;
        }
        for (const message of batch) {
          inHand = message;
          yield message;
          done = message;
          inHand = undefined;
          if (signal?.aborted) return;
        }
        if (autoCommit && done) await this.commit(done);
      }
    } finally {
      if (autoCommit && !this.#closed) {
        if (done) await this.commit(done);
        // The message in hand was not finished: hand it out again next time.
        if (inHand) await this.rewind();
      }
    }
  }

  /** Messages pushed but not yet committed by this consumer (from the info lines, or the part files when the writer is gone). */
  async lag(): Promise<number> {
    return consumerLag(this.#driver, this.queue, this.#committed);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#commitChain;
    await this.#exclusive(() => this.#closeFiles());
    await this.#lock.release();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // --- Internals ---

  #assertOpen(): void {
    if (this.#closed) throw new VQueueError("E_CLOSED", `Consumer "${this.name}" of queue "${this.queue}" is closed.`);
  }

  #exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(task);
    this.#serial = run.catch(() => {});
    return run;
  }

  async #readNow(max: number, maxBytes: number, decode: boolean): Promise<Message[]> {
    const out: Message[] = [];
    let bytes = 0;
    for (;;) {
      if (this.#read.position >= this.#limit && !(this.#localEdge() ?? (await this.#refresh()))) return out;
      const part = this.#read.part;
      let count = this.#read.count;
      // With no writer left, a damaged end of the part may be a torn write: stop before it.
      const holdAtTail = this.#limitFromFile && !this.#finished;
      let tailAt: number | undefined;
      const result = await scanPart(
        this.#partFile!,
        {
          from: this.#read.position,
          limit: this.#limit,
          chunkSize: this.options.readChunkBytes,
          cache: this.#cache,
          onSkip: (offset, skipped) => {
            if (holdAtTail && offset + skipped >= this.#limit) return void (tailAt = offset);
            this.options.onProblem({
              code: "BAD_RECORD",
              queue: this.queue,
              part,
              offset,
              bytes: skipped,
              message: `Consumer "${this.name}" skipped ${skipped} damaged bytes at offset ${offset} of part ${part}.`,
            });
          },
        },
        (buf, _view, at, header) => {
          const start = at + HEADER_SIZE;
          out.push({
            part,
            offset: header.offset,
            seq: header.seq,
            type: header.type,
            // Plain views, no copy: chunks are never reused or written to, so a view stays
            // valid (it keeps its chunk alive while referenced).
            data: decode && header.type === "string" ? decoder.decode(new Uint8Array(buf.buffer, buf.byteOffset + start, header.length)) : new Uint8Array(buf.buffer, buf.byteOffset + start, header.length),
            size: header.length,
            crc: header.crc,
          });
          bytes += header.length;
          count = header.seq;
          return out.length < max && bytes < maxBytes;
        },
      );
      if (tailAt !== undefined) {
        await this.#holdAtTail(part, tailAt, count);
        return out;
      }
      this.#read = { part, position: result.next, count };
      // With room left, go on: the part may have grown, or the next part may hold more.
      if (result.stopped) return out;
    }
  }

  /** Stops before the incomplete end of a part whose writer is gone, and says so once. */
  async #holdAtTail(part: number, at: number, count: number): Promise<void> {
    const size = this.#limit;
    this.#read = { part, position: at, count };
    this.#limit = at;
    // The chunk read holds the torn bytes, which the next writer replaces: never serve them again.
    this.#cache = { buf: undefined, pos: 0 };
    if (this.#tail?.at === at && this.#tail.size === size) return;
    this.#tail = { at, size };
    if (await isV3Record(this.#partFile!, at)) {
      this.options.onProblem({
        code: "UNSUPPORTED_PART",
        queue: this.queue,
        part,
        offset: at,
        bytes: size - at,
        message: `Consumer "${this.name}" stops at offset ${at} of part ${part}: it holds v3 records (crate 0.3.x), which this version does not read.`,
      });
      return;
    }
    this.options.onProblem({
      code: "TORN_TAIL",
      queue: this.queue,
      part,
      offset: at,
      bytes: size - at,
      message: `Consumer "${this.name}" stops before ${size - at} bytes at the end of part ${part} (offset ${at}) that are no whole record; its writer is gone (a torn write). The next writer cuts them off.`,
    });
  }

  async #init(): Promise<void> {
    const driver = this.#driver;
    const { onProblem, create, start } = this.options;
    const parts = await listParts(driver, this.queue);
    const info = await readQueueInfo(driver, this.queue, onProblem);
    if (!info && parts.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${this.queue}" does not exist.`);
    this.#queueInfoFile = await openShared(driver, queueInfoPath(this.queue), { create: false });
    const popBytes = await driver.readFile(popInfoPath(this.queue, this.name));
    const startAt = () => this.#startPosition(parts, info?.part);
    let saved: ConsumerPosition | undefined;
    if (popBytes) {
      const text = decoder.decode(popBytes);
      const pop = parsePopInfo(text, this.queue, this.name);
      // An empty file is the crate's leftover (FORMAT.md, bug 1): a new consumer.
      if (pop) saved = await checkSavedPosition(driver, this.queue, this.name, { part: pop.part, position: pop.position, count: pop.count }, parts, onProblem, startAt);
      else if (text.length > 0) {
        onProblem({ code: "BAD_POSITION", queue: this.queue, message: `Saved position of consumer "${this.name}" is unreadable; starting at the ${start} position.` });
      }
    } else if (!create) {
      throw new VQueueError("E_NOT_FOUND", `Consumer "${this.name}" of queue "${this.queue}" does not exist.`);
    }
    if (!saved) {
      saved = await startAt();
      await this.#writePopLine(saved);
    }
    this.#committed = saved;
    await this.#openPart(saved);
  }

  /** Where a consumer with no (usable) saved position starts, by the `start` option. */
  async #startPosition(parts: number[], infoPart: number | undefined): Promise<ConsumerPosition> {
    if (this.options.start === "earliest") return { part: parts[0] ?? infoPart ?? 0, position: 0, count: 0 };
    const part = Math.max(infoPart ?? 0, parts.at(-1) ?? 0);
    const end = await readPartEnd(this.#driver, this.queue, part, await isWriterGone(this.#driver, this.queue));
    return { part, position: end.edge, count: end.count };
  }

  /** Points the reader at `position`, opening its part's files (before closing the old ones). */
  async #openPart(position: ConsumerPosition): Promise<void> {
    const old = [this.#partFile, this.#pushInfoFile];
    this.#partFile = this.#pushInfoFile = undefined;
    try {
      this.#partFile = await openShared(this.#driver, partPath(this.queue, position.part), { create: false });
      this.#pushInfoFile = this.#partFile && (await openShared(this.#driver, pushInfoPath(this.queue, position.part), { create: false }));
    } finally {
      await Promise.all(old.map((file) => file?.close()));
    }
    this.#read = { ...position };
    this.#cache = { buf: undefined, pos: 0 };
    this.#limit = 0;
    this.#limitFromFile = false;
    this.#tail = undefined;
    this.#dirCheckedAt = 0;
    this.#finished = !this.#partFile; // a missing part reads as empty
  }

  /** Moves the reader forward to a cursor from outside (checked to name a record's end). */
  async #skipTo(target: ConsumerPosition): Promise<void> {
    if (comparePositions(target, this.#read) <= 0) return;
    const samePart = target.part === this.#read.part;
    const file = samePart ? this.#partFile : await openShared(this.#driver, partPath(this.queue, target.part), { create: false });
    try {
      const from = samePart ? this.#read : { part: target.part, position: 0, count: 0 };
      if (!file || !(await isRecordBoundary(file, from, target))) {
        throw new VQueueError("E_CURSOR", `Cannot commit ${formatCursor(target)}: it names no message end of queue "${this.queue}" at or before what exists (consumer "${this.name}" is at ${formatCursor(this.#read)}).`);
      }
    } finally {
      if (!samePart) await file?.close();
    }
    if (!samePart) return this.#openPart(target);
    this.#read = { ...target };
    if (this.#limit < target.position) this.#limit = target.position;
  }

  /**
   * Whether there is more to read, from what the writer in this process last announced (no
   * I/O); undefined when that does not tell (no writer here, or it is on another part).
   */
  #localEdge(): boolean | undefined {
    const edge = localWriterEdge(this.#key);
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
  async #refresh(): Promise<boolean> {
    const part = this.#read.part;
    let gone: boolean | undefined;
    const writerGone = async () => (gone ??= await isWriterGone(this.#driver, this.queue));
    if (!this.#finished) {
      const file = this.#partFile!;
      const push = this.#pushInfoFile && (await readInfoLine(() => this.#pushInfoFile!.read(0, INFO_READ), (text) => parsePushInfo(text, this.queue))).value;
      // While the file is read to its end (no writer), a lagging line says nothing new; a new writer's does.
      if (push && push.edge > this.#limit && (!this.#limitFromFile || !(await writerGone()))) {
        this.#limit = push.edge;
        this.#limitFromFile = false;
        if (this.#limit > this.#read.position) return true;
      }
      if (await this.#newerPartExists(part, writerGone)) {
        // The writer has moved on: this part ends at its file size (its last records included).
        this.#finished = true;
        this.#limitFromFile = false;
        this.#limit = await file.size();
        if (this.#limit > this.#read.position) return true;
      } else {
        const size = await file.size();
        if (size <= this.#limit || (this.#tail?.at === this.#read.position && this.#tail.size === size)) return false;
        if (!(await writerGone())) return false;
        // Bytes past the info line, and no writer to finish them: the file says what is there.
        this.#limit = size;
        this.#limitFromFile = true;
        return this.#limit > this.#read.position;
      }
    }
    const next = (await listParts(this.#driver, this.queue)).find((id) => id > part);
    if (next === undefined) return false;
    await this.#openPart({ part: next, position: 0, count: 0 });
    return this.#refresh();
  }

  async #newerPartExists(part: number, writerGone: () => Promise<boolean>): Promise<boolean> {
    const file = (this.#queueInfoFile ??= await openShared(this.#driver, queueInfoPath(this.queue), { create: false }));
    const info = file && (await readInfoLine(() => file.read(0, INFO_READ), (text) => parseQueueInfo(text, this.queue))).value;
    if (info && info.part > part) return true;
    // The line is missing or damaged, or (once the writer is gone) may lag: ask the directory.
    if (info) {
      if (Date.now() - this.#dirCheckedAt < DIR_CHECK_MS || !(await writerGone())) return false;
      this.#dirCheckedAt = Date.now();
    }
    return (await listParts(this.#driver, this.queue)).some((id) => id > part);
  }

  #watchStorage(cleanups: (() => void)[], onChange: () => void): void {
    let busy = false;
    let again = false;
    const check = async (): Promise<void> => {
      // A change seen while a check runs gets a check of its own after it (else it is lost until the next poll).
      if (busy) return void (again = true);
      if (this.#closed) return;
      busy = true;
      again = false;
      let found = false;
      try {
        found = await this.#exclusive(() => (this.#closed ? Promise.resolve(false) : this.#refresh()));
      } catch {
        // A failed poll is retried on the next tick.
      } finally {
        busy = false;
      }
      if (found) onChange();
      else if (again) return check();
    };
    const timer = setInterval(() => void check(), this.options.pollIntervalMs);
    cleanups.push(() => clearInterval(timer));
    // The part's directory holds its push info (appends); the base holds the queue info (new parts).
    for (const dir of [partDir(this.queue, this.#read.part), ""]) {
      const unwatch = this.#driver.watch?.(dir, () => void check());
      if (unwatch) cleanups.push(unwatch);
    }
    // A write between the caller's check and the watch being set up would go unseen until
    // the next poll: look once more now that the watch is on.
    void check();
  }

  async #savePosition(target: ConsumerPosition): Promise<void> {
    if (comparePositions(target, this.#committed) <= 0) return;
    await this.#writePopLine(target);
    this.#committed = target;
  }

  /** Rewrites the position file in place; opened for the write only (one descriptor less per idle consumer). */
  async #writePopLine(position: ConsumerPosition): Promise<void> {
    const line = formatPopInfo({ queue: this.queue, consumer: this.name, ...position });
    const file = await this.#driver.open(popInfoPath(this.queue, this.name), { create: true });
    try {
      await file!.write(0, ascii.encode(line));
      if (this.options.syncCommits) await file!.sync();
    } finally {
      await file!.close();
    }
  }

  async #closeFiles(): Promise<void> {
    const files = [this.#partFile, this.#pushInfoFile, this.#queueInfoFile];
    this.#partFile = this.#pushInfoFile = this.#queueInfoFile = undefined;
    await Promise.all(files.map((file) => file?.close()));
  }
}

/** Opens consumer `name` of `queue`. See `QueueConsumer`. */
export function openConsumer(queue: string, name: string, options?: ConsumerOptions): Promise<QueueConsumer> {
  return QueueConsumer.open(queue, name, options);
}

