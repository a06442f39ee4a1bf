// Over 300 lines: one class whose batching, part rolling, recovery, index notes and v3
// encoding share the writer's position and files; split, each piece would reach into the others' state.
import type { DriverLock, LogFile, QueueDriver, RecordFile } from "../core/driver";
import { VQueueError } from "../core/errors";
import { fencedLog, fencedRecord, isFenced, onLockLost } from "../storage/fence";
import { openSharedLog, openSharedRecord } from "../storage/handles";
import { formatPushInfo, formatQueueInfo } from "../format/info";
import { normalizeMessage, utf8Length, type EncodedInput, type MessageInput, type MessagePosition } from "../format/message";
import { openLocked } from "../storage/open-locked";
import { assertName } from "../core/names";
import { queueHub, type ChangeHint, type QueueHub } from "../storage/hub";
import { resolveQueueOptions, type QueueOptions, type ResolvedQueueOptions } from "../options/queue";
import { partDir, partPath, partitionsPath, pushInfoPath, queueInfoPath, writerLockPath } from "../storage/paths";
import { PartEncoder } from "../compression/part-codec";
import { HEADER_SIZE, MAGIC, MAGIC_V3, TYPE_COMPRESSED, TYPE_OBJECT, TYPE_STRING, writeRecord } from "../format/record";
import { listParts, readQueueInfo, recoverPart } from "../log/recovery";
import { trackWriter, type WriterTotals } from "../log/totals";
import { PartIndexWriter } from "../log/part-index";
import { startRetention, type RetentionRunner } from "../retention/runner";
import { ProduceExtras, type ProduceOptions, type ProduceResult } from "./produce";

interface PendingPush {
  items: EncodedInput[];
  single: boolean;
  /** An idempotency key (writer/produce.ts): its INTENT is written before the batch. */
  key?: string;
  resolve: (value: never) => void;
  reject: (error: unknown) => void;
}

const SCRATCH_BYTES = 1 << 20;
const ascii = new TextEncoder();

/**
 * The one writer of a queue. Pushes issued together (before the writer gets to them) are
 * written together: one buffered write, at most one fsync and one info-line update per batch.
 */
export class QueueWriter {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  readonly #driver: QueueDriver;
  readonly #lock: DriverLock;
  /** Shared with this queue's consumers in this process: they wake on its batches. */
  #hub!: QueueHub;
  #unregister: (() => void) | undefined;
  /** Keeps the queue's running totals in this process (log/totals.ts) without I/O. */
  #totals: WriterTotals | undefined;

  #part = 0;
  #edge = 0;
  #count = 0;
  #partFile: LogFile | undefined;
  #pushInfoFile: RecordFile | undefined;
  #queueInfoFile: RecordFile | undefined;
  /** With `compression: "zstd"`: the current part is v3, its bodies compressed (compression/part-codec.ts). */
  #encoder: PartEncoder | undefined;
  /** The current part's sparse index (log/part-index.ts). */
  #index: PartIndexWriter | undefined;
  /** Background retention (retention/runner.ts), when the options ask for it. */
  #retention: RetentionRunner | undefined;
  /** Delayed messages and idempotency keys (writer/produce.ts). */
  #extras: ProduceExtras | undefined;

  #pending: PendingPush[] = [];
  #flushing: Promise<void> | undefined;
  #failure: unknown;
  #closed = false;
  #closing: Promise<void> | undefined;
  #unsynced = false;
  #syncTimer: ReturnType<typeof setInterval> | undefined;
  #scratch = new Uint8Array(SCRATCH_BYTES);
  #textEncoder = new TextEncoder();

  private constructor(name: string, options: ResolvedQueueOptions, lock: DriverLock) {
    this.name = name;
    this.options = options;
    this.#driver = options.driver;
    this.#lock = lock;
  }

  /** Opens (and by default creates) a queue for writing; takes the queue's writer lock. */
  static async open(name: string, options: QueueOptions = {}): Promise<QueueWriter> {
    assertName(name, "queue");
    const resolved = resolveQueueOptions(options);
    const writer = await openLocked(
      resolved.driver,
      writerLockPath(name),
      `Queue "${name}" already has a writer (in this or another process). One writer per queue: close the other one first.`,
      (lock) => new QueueWriter(name, resolved, lock),
      async (opened) => {
        await opened.#init();
        opened.#extras = await ProduceExtras.open({
          queue: name,
          driver: resolved.driver,
          options: resolved,
          lock: opened.#lock,
          enqueue: (items, key) => opened.#enqueue(items, false, key) as Promise<MessagePosition[]>,
        });
      },
      (opened) => opened.#closeFiles(),
    );
    const lock = writer.#lock;
    // Taken once open (a hub nobody uses is let go): held by the registration from here on.
    writer.#hub = queueHub(resolved.driver, name);
    writer.#unregister = writer.#hub.registerWriter(() => !lock.lost?.aborted && (lock.fresh?.() ?? true));
    writer.#totals = trackWriter(resolved.driver, name);
    writer.#totals.report(writer.#part, writer.#edge, writer.#count);
    // A lease lost to another writer stops this one at once: nothing is written or acknowledged after.
    lock.lost?.addEventListener("abort", () => writer.#stop(lock.lost!.reason), { once: true });
    await writer.#extras!.start();
    writer.#retention = startRetention(resolved.driver, name, resolved.retention, resolved.onProblem, lock);
    if (resolved.durability === "interval") {
      writer.#syncTimer = setInterval(() => void writer.#backgroundSync(), resolved.fsyncIntervalMs);
      (writer.#syncTimer as { unref?: () => void }).unref?.();
    }
    return writer;
  }

  /** Current part, its size in bytes and its record count. */
  get position(): { part: number; edge: number; count: number } {
    return { part: this.#part, edge: this.#edge, count: this.#count };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Whether this writer still holds its queue's lock: asks the storage when the lease is stale
   * (a lease driver), false once the lock is lost (it then refuses every write). Its owner drops
   * it and opens the queue again before writing: nothing was written, so nothing is lost or
   * doubled. In workerd an isolate runs no timer between requests, so an idle one's leases
   * lapse and another isolate may take the queue meanwhile.
   */
  async holds(): Promise<boolean> {
    if (this.#closed) return false;
    try {
      await this.#lock.assertHeld?.();
    } catch {
      return false;
    }
    return !this.#lock.lost?.aborted;
  }

  /**
   * Calls `listener` once when this writer's lock is lost (a lease taken over by another holder,
   * found by a renewal, a check before a write, or a write the storage's fence refused), at once
   * when it is already; never for a lock that cannot be lost.
   */
  whenLockLost(listener: () => void): void {
    onLockLost(this.#lock, listener);
  }

  /** Delayed messages this writer holds, not yet due (a partitioned queue's instance keeps such a partition). */
  get delayedPending(): number {
    return this.#extras?.delayed.pending ?? 0;
  }

  /**
   * Appends one message. Strings are stored as text (`S`), bytes as `O`, any other JSON
   * value as its JSON text. Resolves once the message is as durable as `durability` says.
   */
  push(message: MessageInput): Promise<MessagePosition> {
    let item: EncodedInput;
    try {
      item = this.#check(message);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#enqueue([item], true) as Promise<MessagePosition>;
  }

  /** Appends messages in order, in one write; resolves with where each landed. */
  pushBatch(messages: Iterable<MessageInput>): Promise<MessagePosition[]> {
    const items: EncodedInput[] = [];
    try {
      for (const message of messages) items.push(this.#check(message));
    } catch (error) {
      return Promise.reject(error);
    }
    if (items.length === 0) return Promise.resolve([]);
    return this.#enqueue(items, false) as Promise<MessagePosition[]>;
  }

  /**
   * Pushes messages with options (writer/produce.ts): `key`, an idempotency key (a produce whose key
   * was accepted within `idempotencyWindowMs` writes nothing and answers the first result);
   * `delayMs` or `at`, delivered no earlier (kept aside until then, then pushed by this writer).
   */
  produce(messages: Iterable<MessageInput>, options: ProduceOptions = {}): Promise<ProduceResult> {
    const items: EncodedInput[] = [];
    try {
      for (const message of messages) items.push(this.#check(message));
      if (items.length === 0) throw new VQueueError("E_MESSAGE", "Nothing to produce: give at least one message.");
      if (this.#closed || this.#closing) throw new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#extras!.produce(items, options);
  }

  /** Waits until every push issued so far is written. */
  async flush(): Promise<void> {
    while (this.#flushing) await this.#flushing;
  }

  /** Flushes, fsyncs (unless durability is "none"), closes the files and releases the lock. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // --- Internals ---

  #check(message: MessageInput): EncodedInput {
    const item = normalizeMessage(message);
    const max = this.options.maxMessageBytes;
    if (typeof item === "string" ? item.length > max || (item.length * 3 > max && utf8Length(item) > max) : item.length > max) {
      throw new VQueueError("E_MESSAGE", `Message too large: the limit is ${max} bytes (option maxMessageBytes).`);
    }
    return item;
  }

  #enqueue(items: EncodedInput[], single: boolean, key?: string): Promise<unknown> {
    if (this.#closed || (this.#closing && key === undefined)) return Promise.reject(new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`));
    if (this.#failure) return Promise.reject(this.#failedError());
    return new Promise((resolve, reject) => {
      this.#pending.push({ items, single, key, resolve, reject });
      this.#flushing ??= this.#runFlush();
    });
  }

  async #runFlush(): Promise<void> {
    try {
      // Let pushes issued in the same tick join this batch, and producers that were just
      // acknowledged (their continuations run a few microtasks later) push their next one.
      for (let tick = 0; tick < 8; tick++) await undefined;
      while (this.#pending.length > 0) {
        const batch = this.#pending;
        this.#pending = [];
        if (this.#failure) {
          for (const p of batch) p.reject(this.#failedError());
          continue;
        }
        try {
          if (batch.some((p) => p.key)) await this.#extras!.beforeWrite(batch, this.#part, this.#count);
          const results = await this.#writeBatch(batch);
          if (this.#failure) throw this.#failure; // the lock was lost meanwhile: not acknowledged
          for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i] as never);
        } catch (error) {
          this.#failure = error;
          for (const p of batch) p.reject(this.#failedError());
          this.#hub.emit();
        }
      }
    } finally {
      this.#flushing = undefined;
    }
  }

  async #writeBatch(batch: PendingPush[]): Promise<unknown[]> {
    const { maxPartBytes, durability } = this.options;
    const results: unknown[] = Array.from({ length: batch.length });
    let buf = this.#scratch;
    let view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    let used = 0;
    const start = { part: this.#part, edge: this.#edge, count: this.#count };
    // Waiting readers in this process get the batch's bytes with the wake-up, and need no I/O
    // to read them: kept when the batch went out in one write (the scratch buffer is reused).
    const readersWaiting = this.#hub.hasListeners;
    let tail: ChangeHint["tail"];
    let writes = 0;
    let announced = false;

    const writeOut = async () => {
      if (used === 0) return;
      await this.#lock.assertHeld?.();
      if (readersWaiting) tail = writes === 0 && this.#part === start.part ? { start: this.#edge, data: buf.slice(0, used) } : undefined;
      writes++;
      await this.#partFile!.append(this.#edge, buf.subarray(0, used));
      this.#edge += used;
      used = 0;
      buf = this.#scratch;
      view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    };

    try {
      for (let b = 0; b < batch.length; b++) {
        const { items, single } = batch[b]!;
        const positions: MessagePosition[] = single ? [] : Array.from({ length: items.length });
        for (let k = 0; k < items.length; k++) {
          const item = items[k]!;
          if (this.#edge + used >= maxPartBytes) {
            await writeOut();
            await this.#rollPart();
          }
          if (this.#encoder?.learnt) {
            // The dictionary goes to storage before any record that uses it (docs/format.md#the-dictionary).
            await writeOut();
            await this.#encoder.prepare();
          }
          const isText = typeof item === "string";
          const maxLength = isText ? item.length * 3 : item.length;
          if (used + HEADER_SIZE + maxLength > buf.length) {
            await writeOut();
            if (HEADER_SIZE + maxLength > buf.length) {
              buf = new Uint8Array(HEADER_SIZE + maxLength);
              view = new DataView(buf.buffer);
            }
          }
          const at = used + HEADER_SIZE;
          let length = isText ? encodeText(this.#textEncoder, item, buf, at) : (buf.set(item, at), item.length);
          let typeByte = isText ? TYPE_STRING : TYPE_OBJECT;
          const stored = this.#encoder?.encode(buf, view, at, length);
          if (stored !== undefined) [length, typeByte] = [stored, typeByte | TYPE_COMPRESSED];
          const offset = this.#edge + used;
          const seq = ++this.#count;
          this.#index!.note(seq, offset);
          writeRecord(buf, view, used, offset, length, seq, typeByte, this.#encoder ? MAGIC_V3 : MAGIC);
          used += HEADER_SIZE + length;
          const position = { part: this.#part, offset, seq };
          if (single) results[b] = position;
          else positions[k] = position;
        }
        if (!single) results[b] = positions;
      }
      await writeOut();
      if (durability === "fsync") await this.#partFile!.sync();
      else if (durability === "interval") this.#unsynced = true;
      if (this.#lock.lost?.aborted) throw this.#lock.lost.reason;
      // Readers may have it now (as durable as promised); the info line is a hint and follows.
      announced = true;
      this.#hub.emit({ part: this.#part, edge: this.#edge, tail });
      await this.#writePushInfo();
      await this.#index!.flush();
      return results;
    } catch (error) {
      // Best effort: leave the part as it was before this batch, so a rejected push is not in
      // it; unless readers were already told of it.
      // Never after a lost lock: the file is another writer's now.
      if (isFenced(error)) this.#stop(error);
      if (this.#part === start.part && !announced && !this.#lock.lost?.aborted && !isFenced(error)) {
        await this.#partFile?.truncate(start.edge).catch(() => {});
        this.#index?.rollback(start.count);
        this.#edge = start.edge;
        this.#count = start.count;
      }
      throw error;
    }
  }

  /** A file of the queue's, opened (made if missing) with this writer's lock as the fence of every write (storage/fence.ts). */
  async #openLog(path: string): Promise<LogFile> {
    return fencedLog((await openSharedLog(this.#driver, path, { create: true }))!, this.#lock);
  }

  async #openRecord(path: string): Promise<RecordFile> {
    return fencedRecord((await openSharedRecord(this.#driver, path, { create: true }))!, this.#lock);
  }

  async #writePushInfo(): Promise<void> {
    this.#totals?.report(this.#part, this.#edge, this.#count);
    const line = formatPushInfo({ queue: this.name, edge: this.#edge, count: this.#count });
    await this.#pushInfoFile!.replace(ascii.encode(line));
  }

  async #init(): Promise<void> {
    const driver = this.#driver;
    const { onProblem, create, rollOnOpen } = this.options;
    const parts = await listParts(driver, this.name);
    const info = await readQueueInfo(driver, this.name, onProblem);
    if (info === undefined && parts.length === 0) {
      if (!create) throw new VQueueError("E_NOT_FOUND", `Queue "${this.name}" does not exist.`);
      // A partitioned queue's name holds no parts of its own: not made an ordinary queue over it.
      if ((await driver.readRecord(partitionsPath(this.name))) !== undefined) {
        throw new VQueueError(
          "E_OPTION",
          `Queue "${this.name}" is a partitioned queue: use PartitionedWriter (openPartitionedQueue) or the partitioned API, or open one of its partitions ("${this.name}.p0", ...).`,
        );
      }
      this.#queueInfoFile = await this.#openRecord(queueInfoPath(this.name));
      await this.#startPart(0);
      return;
    }
    this.#queueInfoFile = await this.#openRecord(queueInfoPath(this.name));
    const current = Math.max(info?.part ?? -1, parts.at(-1) ?? -1);
    if (!parts.includes(current)) {
      // The info line names a part whose directory is gone: start it afresh.
      await this.#startPart(current);
      return;
    }
    this.#part = current;
    this.#partFile = await this.#openLog(partPath(this.name, current));
    this.#pushInfoFile = await this.#openRecord(pushInfoPath(this.name, current));
    const recovered = await recoverPart(driver, this.name, current, this.#partFile!, onProblem);
    if (recovered.v3) {
      // A v3 part (the crate 0.3.x's, or compressed by an earlier writer), left as it is:
      // appending would need its dictionary and format; new records go to a new part. It is
      // sealed all the same (a crash left its index without the end entry retention dates it by).
      const index = await PartIndexWriter.recover(driver, this.name, current, this.#partFile!, recovered, this.options.indexInterval, onProblem, this.#lock);
      await index.seal(recovered.count + 1, recovered.edge).finally(() => index.close());
      await this.#closeFiles({ keepQueueInfo: true });
      await this.#startPart(current + 1);
      return;
    }
    this.#edge = recovered.edge;
    this.#count = recovered.count;
    this.#index = await PartIndexWriter.recover(driver, this.name, current, this.#partFile!, recovered, this.options.indexInterval, onProblem, this.#lock);
    if (recovered.infoStale) await this.#writePushInfo();
    if (info?.part !== current) await this.#writeQueueInfo();
    // A part is v2 or v3: compressed records never go after v2 ones. A part cut short is never appended to (`shrunk`).
    if (recovered.shrunk || ((rollOnOpen || this.#compressing) && this.#edge > 0)) await this.#rollPart();
    else this.#newEncoder();
  }

  /** Closes the current part for good and starts the next one. */
  async #rollPart(): Promise<void> {
    if (this.options.durability !== "none") await this.#partFile!.sync();
    this.#unsynced = false;
    await this.#writePushInfo();
    await this.#index!.seal(this.#count + 1, this.#edge);
    await Promise.all([this.#partFile!.close(), this.#pushInfoFile!.close(), this.#index!.close()]);
    this.#partFile = this.#pushInfoFile = this.#index = undefined;
    await this.#startPart(this.#part + 1);
    this.#retention?.kick();
  }

  async #startPart(part: number): Promise<void> {
    const driver = this.#driver;
    // Making a directory is not a fenced write: a writer that lost its lock must not make the
    // next part's (readers and the next writer take the newest part directory for the current one once this writer is gone).
    await this.#lock.assertHeld?.();
    await driver.mkdir(partDir(this.name, part));
    const partFile = await this.#openLog(partPath(this.name, part));
    const pushInfoFile = await this.#openRecord(pushInfoPath(this.name, part));
    this.#partFile = partFile;
    this.#pushInfoFile = pushInfoFile;
    this.#index = await PartIndexWriter.create(driver, this.name, part, this.options.indexInterval, this.#lock);
    this.#part = part;
    this.#edge = 0;
    this.#count = 0;
    this.#newEncoder();
    await partFile!.truncate(0);
    await this.#writePushInfo();
    if (this.options.durability !== "none") {
      await pushInfoFile!.sync();
      await driver.syncDir?.(partDir(this.name, part));
      await driver.syncDir?.("");
    }
    // Readers follow the queue info line: name the new part only once it exists.
    await this.#writeQueueInfo();
  }

  get #compressing(): boolean {
    return this.options.compression === "zstd";
  }

  /** The current part's encoder, when it is written compressed (v3). */
  #newEncoder(): void {
    this.#encoder?.free();
    const {
      compression,
      compressionLevel: level,
      compressionMinBytes: minBytes,
      compressionSampleBytes: sampleBytes,
      compressionDictionary: dictionary,
      durability,
      zstd,
    } = this.options;
    this.#encoder =
      compression === "zstd"
        ? new PartEncoder({
            driver: this.#driver,
            queue: this.name,
            part: this.#part,
            level,
            minBytes,
            sampleBytes,
            dictionary,
            sync: durability !== "none",
            zstd,
            fence: this.#lock,
          })
        : undefined;
  }

  async #writeQueueInfo(): Promise<void> {
    await this.#queueInfoFile!.replace(ascii.encode(formatQueueInfo({ queue: this.name, part: this.#part })));
    if (this.options.durability !== "none") await this.#queueInfoFile!.sync();
  }

  async #backgroundSync(): Promise<void> {
    if (!this.#unsynced || this.#flushing || this.#closed) return;
    this.#unsynced = false;
    await this.#partFile?.sync().catch((error: unknown) => {
      this.#failure ??= error;
    });
  }

  /** Refuses every push from now on with `error` (a lost lock). */
  #stop(error: unknown): void {
    this.#failure ??= error;
    this.#totals?.release(); // another writer has the queue now: its info lines tell
    void this.#retention?.stop(); // and its retention: this one's limits no longer apply
    for (const p of this.#pending.splice(0)) p.reject(this.#failedError());
    this.#hub.emit();
  }

  #failedError(): VQueueError {
    const cause = this.#failure;
    // The engine's own refusals (a lost lock, ...) as they are; a storage failure says what now.
    return VQueueError.isError(cause) && cause.code !== "E_IO"
      ? cause
      : new VQueueError("E_IO", `Queue "${this.name}" stopped after a storage error (${(cause as Error)?.message ?? cause}); reopen it to recover.`, { cause });
  }

  async #close(): Promise<void> {
    await this.#extras?.stop();
    await this.flush();
    this.#closed = true;
    if (this.#syncTimer) clearInterval(this.#syncTimer);
    await this.#retention?.stop();
    try {
      if (this.#unsynced && !this.#failure) await this.#partFile?.sync();
      if (!this.#failure) await this.#index?.seal(this.#count + 1, this.#edge);
    } finally {
      await this.#closeFiles();
      await this.#extras?.close();
      this.#totals?.release();
      this.#unregister?.();
      await this.#lock.release();
    }
  }

  async #closeFiles(options: { keepQueueInfo?: boolean } = {}): Promise<void> {
    const files = [this.#partFile, this.#pushInfoFile, this.#index, options.keepQueueInfo ? undefined : this.#queueInfoFile];
    this.#encoder?.free();
    this.#encoder = undefined;
    this.#partFile = this.#pushInfoFile = this.#index = undefined;
    if (!options.keepQueueInfo) this.#queueInfoFile = undefined;
    await Promise.all(files.map((file) => file?.close()));
  }
}

/** Opens a queue for writing. See `QueueWriter`. */
export function openQueue(name: string, options?: QueueOptions): Promise<QueueWriter> {
  return QueueWriter.open(name, options);
}

// --- Internal helpers ---

/** Writes `text` as UTF-8 at `at`; ASCII takes a plain loop, faster than encodeInto for short text. */
function encodeText(encoder: TextEncoder, text: string, buf: Uint8Array, at: number): number {
  const n = text.length;
  if (n < 128) {
    let i = 0;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c >= 0x80) break;
      buf[at + i] = c;
    }
    if (i === n) return n;
  }
  return encoder.encodeInto(text, buf.subarray(at)).written;
}
