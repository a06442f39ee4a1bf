// Over 300 lines: the writer's public calls with their docs, and the batch loop they feed, share
// its pending pushes, failure and lock; the record bytes (batch-encoder.ts) and the part files
// (parts.ts) are modules of their own.
import type { DriverLock } from "../core/driver";
import { VQueueError } from "../core/errors";
import { isFenced, onLockLost } from "../storage/fence";
import { normalizeMessage, utf8Length, type EncodedInput, type MessageInput, type MessagePosition } from "../format/message";
import { openLocked } from "../storage/open-locked";
import { assertName } from "../core/names";
import { queueHub, type ChangeHint, type QueueHub } from "../storage/hub";
import { resolveQueueOptions, type QueueOptions, type ResolvedQueueOptions } from "../options/queue";
import { writerLockPath } from "../storage/paths";
import { trackWriter, type WriterTotals } from "../log/totals";
import { startRetention, type RetentionRunner } from "../retention/runner";
import { ProduceExtras, type FiringRoute, type ProduceOptions, type ProduceResult } from "./produce";
import type { Schedule, ScheduleInput } from "./schedules";
import { BatchEncoder } from "./batch-encoder";
import { PartFiles } from "./parts";
import { AttributeWriter } from "./attributes";
import type { MessageAttributes } from "../format/attributes";

interface PendingPush {
  items: EncodedInput[];
  single: boolean;
  /** An idempotency key (writer/produce.ts): its INTENT is written before the batch. */
  key?: string;
  /** Its messages' attributes (format/attributes.ts): their runs are written before the records. */
  attributes?: MessageAttributes;
  resolve: (value: never) => void;
  reject: (error: unknown) => void;
}

/**
 * The one writer of a queue. Pushes issued together (before the writer gets to them) are
 * written together: one buffered write, at most one fsync and one info-line update per batch.
 * Its batches are encoded by a `BatchEncoder` (writer/batch-encoder.ts) and appended to its
 * `PartFiles` (writer/parts.ts), which open, roll and seal the parts.
 */
export class QueueWriter {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  readonly #lock: DriverLock;
  /** Shared with this queue's consumers in this process: they wake on its batches. */
  #hub!: QueueHub;
  #unregister: (() => void) | undefined;
  /** Keeps the queue's running totals in this process (log/totals.ts) without I/O. */
  #totals: WriterTotals | undefined;

  /** The current part and its files. */
  readonly #parts: PartFiles;
  readonly #records = new BatchEncoder();
  /** Background retention (retention/runner.ts), when the options ask for it. */
  #retention: RetentionRunner | undefined;
  /** Delayed messages and idempotency keys (writer/produce.ts). */
  #extras: ProduceExtras | undefined;
  /** Message attributes beside the records (writer/attributes.ts). */
  readonly #attributes: AttributeWriter;

  #pending: PendingPush[] = [];
  #flushing: Promise<void> | undefined;
  #failure: unknown;
  #closed = false;
  #closing: Promise<void> | undefined;
  #syncTimer: ReturnType<typeof setInterval> | undefined;

  private constructor(name: string, options: ResolvedQueueOptions, lock: DriverLock) {
    this.name = name;
    this.options = options;
    this.#lock = lock;
    this.#parts = new PartFiles({ queue: name, options, lock, report: (part, edge, count) => this.#totals?.report(part, edge, count) });
    this.#attributes = new AttributeWriter({
      driver: options.driver,
      queue: name,
      fence: lock,
      sync: options.durability === "fsync",
      onProblem: options.onProblem,
    });
  }

  /** Opens (and by default creates) a queue for writing; takes the queue's writer lock. */
  static async open(name: string, options: QueueOptions = {}, routeFiring?: FiringRoute): Promise<QueueWriter> {
    assertName(name, "queue");
    const resolved = resolveQueueOptions(options);
    const writer = await openLocked(
      resolved.driver,
      writerLockPath(name),
      `Queue "${name}" already has a writer (in this or another process). One writer per queue: close the other one first.`,
      (lock) => new QueueWriter(name, resolved, lock),
      async (opened) => {
        await opened.#parts.open();
        // Runs of records a crash cut off name none from now on.
        await opened.#attributes.cut(opened.#parts.part, opened.#parts.count);
        opened.#extras = await ProduceExtras.open({
          queue: name,
          driver: resolved.driver,
          options: resolved,
          lock: opened.#lock,
          enqueue: (items, key, attributes) => opened.#enqueue(items, false, key, attributes) as Promise<MessagePosition[]>,
          routeFiring,
        });
      },
      async (opened) => {
        await opened.#attributes.close();
        await opened.#parts.close();
      },
    );
    const lock = writer.#lock;
    // Taken once open (a hub nobody uses is let go): held by the registration from here on.
    writer.#hub = queueHub(resolved.driver, name);
    writer.#unregister = writer.#hub.registerWriter(() => !lock.lost?.aborted && (lock.fresh?.() ?? true));
    writer.#totals = trackWriter(resolved.driver, name);
    const { part, edge, count } = writer.#parts;
    writer.#totals.report(part, edge, count);
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
    return this.#parts.position;
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

  /** Schedules this writer keeps (writer/schedules.ts): a queue's instance keeps its writer while it has some. */
  get scheduleCount(): number {
    return this.#extras?.schedules.size ?? 0;
  }

  /**
   * Sets schedule `name` (created, or updated in place): a message produced by this writer (or
   * the queue's next one) at each tick of `cron` (in `tz`) or every `everyMs`; once only for
   * ticks missed while no writer was open. Durable before it resolves.
   */
  schedule(name: string, schedule: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    if (this.#closed || this.#closing) return Promise.reject(new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`));
    return this.#extras!.schedules.upsert(name, schedule);
  }

  /** Removes schedule `name`: false when there is none. */
  unschedule(name: string): Promise<boolean> {
    if (this.#closed || this.#closing) return Promise.reject(new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`));
    return this.#extras!.schedules.remove(name);
  }

  /** The queue's schedules, by name, with their last and next firing. */
  schedules(): Schedule[] {
    return this.#extras?.schedules.list() ?? [];
  }

  /** Produces a firing of partition 0's schedules routed to this partition (writer/partitioned.ts), once per key. */
  fireRouted(key: string, data: EncodedInput): Promise<void> {
    if (this.#closed || this.#closing) return Promise.reject(new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`));
    return this.#extras!.fire(key, data);
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

  #enqueue(items: EncodedInput[], single: boolean, key?: string, attributes?: MessageAttributes): Promise<unknown> {
    if (this.#closed || (this.#closing && key === undefined)) return Promise.reject(new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`));
    if (this.#failure) return Promise.reject(this.#failedError());
    return new Promise((resolve, reject) => {
      this.#pending.push({ items, single, key, attributes, resolve, reject });
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
          if (batch.some((p) => p.key)) await this.#extras!.beforeWrite(batch, this.#parts.part, this.#parts.count);
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
    const { maxPartBytes } = this.options;
    const parts = this.#parts;
    const records = this.#records;
    // Filled by push, in order: `Array.from({ length })` costs about 90 ns an element (Node 20), as much as encoding a record.
    const results: unknown[] = [];
    const start = parts.position;
    // Waiting readers in this process get the batch's bytes with the wake-up, and need no I/O
    // to read them: kept when the batch went out in one write (the scratch buffer is reused).
    const readersWaiting = this.#hub.hasListeners;
    let tail: ChangeHint["tail"];
    let writes = 0;
    let announced = false;

    const writeOut = async () => {
      if (records.used === 0) return;
      await this.#lock.assertHeld?.();
      if (await this.#attributes.flush(parts.part)) this.#hub.noteAttributes();
      const data = records.take();
      if (readersWaiting) tail = writes === 0 && parts.part === start.part ? { start: parts.edge, data: data.slice() } : undefined;
      writes++;
      await parts.append(data);
    };

    try {
      for (let b = 0; b < batch.length; b++) {
        const { items, single, attributes } = batch[b]!;
        const positions: MessagePosition[] = [];
        for (let k = 0; k < items.length; k++) {
          const item = items[k]!;
          if (parts.edge + records.used >= maxPartBytes) {
            await writeOut();
            await this.#roll();
          }
          if (parts.codec?.learnt) {
            // The dictionary goes to storage before any record that uses it (docs/format.md#the-dictionary).
            await writeOut();
            await parts.codec.prepare();
          }
          if (!records.fits(item)) {
            await writeOut();
            records.makeRoom(item);
          }
          const offset = parts.edge + records.used;
          const seq = parts.count + 1;
          const crc = records.add(item, offset, seq, parts.codec);
          if (attributes) this.#attributes.add(attributes, offset, seq, crc);
          parts.addRecord(seq, offset);
          const position = { part: parts.part, offset, seq };
          if (single) results.push(position);
          else positions.push(position);
        }
        if (!single) results.push(positions);
      }
      await writeOut();
      await parts.settle();
      if (this.#lock.lost?.aborted) throw this.#lock.lost.reason;
      // Readers may have it now (as durable as promised); the info line is a hint and follows.
      announced = true;
      this.#hub.emit({ part: parts.part, edge: parts.edge, tail });
      await parts.finishBatch();
      return results;
    } catch (error) {
      // Best effort: leave the part as it was before this batch, so a rejected push is not in
      // it; unless readers were already told of it.
      // Never after a lost lock: the file is another writer's now.
      if (isFenced(error)) this.#stop(error);
      if (parts.part === start.part && !announced && !this.#lock.lost?.aborted && !isFenced(error)) {
        await parts.rollback(start);
        await this.#attributes.cut(start.part, start.count).catch(() => {}); // else the next open cuts them
        // Readers that read the batch's runs (written before its records) look at the file again.
        this.#hub.noteAttributes();
      }
      throw error;
    }
  }

  /** Seals the current part and starts the next; retention may now drop a part. */
  async #roll(): Promise<void> {
    await this.#parts.roll();
    this.#retention?.kick();
  }

  async #backgroundSync(): Promise<void> {
    if (this.#flushing || this.#closed) return;
    await this.#parts.syncPending().catch((error: unknown) => {
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
      if (!this.#failure) {
        await this.#parts.syncPending();
        await this.#parts.markEnd();
      }
    } finally {
      await this.#parts.close();
      await this.#attributes.close();
      await this.#extras?.close();
      this.#totals?.release();
      this.#unregister?.();
      await this.#lock.release();
    }
  }
}

/** Opens a queue for writing. See `QueueWriter`. */
export function openQueue(name: string, options?: QueueOptions): Promise<QueueWriter> {
  return QueueWriter.open(name, options);
}
