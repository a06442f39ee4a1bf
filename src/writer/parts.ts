import type { DriverLock, LogFile, QueueDriver, RecordFile } from "../core/driver";
import { VQueueError } from "../core/errors";
import { fencedLog, fencedRecord } from "../storage/fence";
import { openSharedLog, openSharedRecord } from "../storage/handles";
import { formatPushInfo, formatQueueInfo } from "../format/info";
import type { ResolvedQueueOptions } from "../options/queue";
import { partDir, partPath, partitionsPath, pushInfoPath, queueInfoPath } from "../storage/paths";
import { PartEncoder } from "../compression/part-codec";
import { listParts, readQueueInfo, recoverPart } from "../log/recovery";
import { PartIndexWriter } from "../log/part-index";

const ascii = new TextEncoder();

/** Where a writer stands: its current part, that part's size in bytes and its record count. */
export interface PartPosition {
  part: number;
  edge: number;
  count: number;
}

export interface PartFilesOptions {
  queue: string;
  options: ResolvedQueueOptions;
  /** The writer's lock: the fence of every write (storage/fence.ts). */
  lock: DriverLock;
  /** Told where the writer stands each time the push info line is written (the queue's running totals, log/totals.ts). */
  report: (part: number, edge: number, count: number) => void;
}

/**
 * The parts a writer appends to (what tidwall/wal calls segments): the current part's file, its
 * push info line, sparse index (log/part-index.ts) and codec when it is v3, and the queue info
 * line that names it. `open` recovers the current part, `roll` seals it and starts the next.
 * Not safe for concurrent calls: the writer makes one at a time.
 */
export class PartFiles {
  readonly #queue: string;
  readonly #options: ResolvedQueueOptions;
  readonly #driver: QueueDriver;
  readonly #lock: DriverLock;
  readonly #report: PartFilesOptions["report"];

  #part = 0;
  #edge = 0;
  #count = 0;
  #log: LogFile | undefined;
  #pushInfo: RecordFile | undefined;
  #queueInfo: RecordFile | undefined;
  /** With `compression: "zstd"`: the current part is v3, its bodies compressed (compression/part-codec.ts). */
  #codec: PartEncoder | undefined;
  #index: PartIndexWriter | undefined;
  /** Appended with `durability: "interval"` and not yet fsynced. */
  #unsynced = false;

  constructor({ queue, options, lock, report }: PartFilesOptions) {
    this.#queue = queue;
    this.#options = options;
    this.#driver = options.driver;
    this.#lock = lock;
    this.#report = report;
  }

  get part(): number {
    return this.#part;
  }

  /** The current part's size: where the next record goes. */
  get edge(): number {
    return this.#edge;
  }

  get count(): number {
    return this.#count;
  }

  get position(): PartPosition {
    return { part: this.#part, edge: this.#edge, count: this.#count };
  }

  /** The current part's codec when it is written compressed (v3). */
  get codec(): PartEncoder | undefined {
    return this.#codec;
  }

  /** Recovers the queue's current part, or starts part 0 of a new queue (with `create`). */
  async open(): Promise<void> {
    const driver = this.#driver;
    const queue = this.#queue;
    const { onProblem, create, rollOnOpen, compression, indexInterval } = this.#options;
    const parts = await listParts(driver, queue);
    const info = await readQueueInfo(driver, queue, onProblem);
    if (info === undefined && parts.length === 0) {
      if (!create) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
      // A partitioned queue's name holds no parts of its own: not made an ordinary queue over it.
      if ((await driver.readRecord(partitionsPath(queue))) !== undefined) {
        throw new VQueueError(
          "E_OPTION",
          `Queue "${queue}" is a partitioned queue: use PartitionedWriter (openPartitionedQueue) or the partitioned API, or open one of its partitions ("${queue}.p0", ...).`,
        );
      }
      this.#queueInfo = await this.#openRecord(queueInfoPath(queue));
      await this.#start(0);
      return;
    }
    this.#queueInfo = await this.#openRecord(queueInfoPath(queue));
    const current = Math.max(info?.part ?? -1, parts.at(-1) ?? -1);
    if (!parts.includes(current)) {
      // The info line names a part whose directory is gone: start it afresh.
      await this.#start(current);
      return;
    }
    this.#part = current;
    this.#log = await this.#openLog(partPath(queue, current));
    this.#pushInfo = await this.#openRecord(pushInfoPath(queue, current));
    const recovered = await recoverPart(driver, queue, current, this.#log, onProblem);
    if (recovered.v3) {
      // A v3 part (the crate 0.3.x's, or compressed by an earlier writer), left as it is:
      // appending would need its dictionary and format; new records go to a new part. It is
      // sealed all the same (a crash left its index without the end entry retention dates it by).
      const index = await PartIndexWriter.recover(driver, queue, current, this.#log, recovered, indexInterval, onProblem, this.#lock);
      await index.seal(recovered.count + 1, recovered.edge).finally(() => index.close());
      await this.#closeFiles({ keepQueueInfo: true });
      await this.#start(current + 1);
      return;
    }
    this.#edge = recovered.edge;
    this.#count = recovered.count;
    this.#index = await PartIndexWriter.recover(driver, queue, current, this.#log, recovered, indexInterval, onProblem, this.#lock);
    if (recovered.infoStale) await this.#writePushInfo();
    if (info?.part !== current) await this.#writeQueueInfo();
    // A part is v2 or v3: compressed records never go after v2 ones. A part cut short is never appended to (`shrunk`).
    if (recovered.shrunk || ((rollOnOpen || compression === "zstd") && this.#edge > 0)) await this.roll();
    else this.#newCodec();
  }

  /** Counts record `seq` (the count + 1), just encoded at `offset` of the current part, and notes it for the index. */
  addRecord(seq: number, offset: number): void {
    this.#count = seq;
    this.#index!.note(seq, offset);
  }

  /** Appends encoded records at the current part's edge. */
  async append(records: Uint8Array): Promise<void> {
    await this.#log!.append(this.#edge, records);
    this.#edge += records.length;
  }

  /** Makes what was appended as durable as `durability` says: fsynced now, by the interval's timer, or never. */
  async settle(): Promise<void> {
    const { durability } = this.#options;
    if (durability === "fsync") await this.#log!.sync();
    else if (durability === "interval") this.#unsynced = true;
  }

  /** Fsyncs the current part if `settle` left it for later (the interval's timer, a close). */
  async syncPending(): Promise<void> {
    if (!this.#unsynced) return;
    this.#unsynced = false;
    await this.#log?.sync();
  }

  /** After a batch: its push info line (a hint for readers) and its index entries, dated now. */
  async finishBatch(): Promise<void> {
    await this.#writePushInfo();
    await this.#index!.flush();
  }

  /** Cuts the current part back to `to` (a batch not acknowledged), best effort. */
  async rollback(to: PartPosition): Promise<void> {
    await this.#log?.truncate(to.edge).catch(() => {});
    this.#index?.rollback(to.count);
    this.#edge = to.edge;
    this.#count = to.count;
  }

  /** Closes the current part for good and starts the next one. */
  async roll(): Promise<void> {
    if (this.#options.durability !== "none") await this.#log!.sync();
    this.#unsynced = false;
    await this.#writePushInfo();
    await this.#index!.seal(this.#count + 1, this.#edge);
    await Promise.all([this.#log!.close(), this.#pushInfo!.close(), this.#index!.close()]);
    this.#log = this.#pushInfo = this.#index = undefined;
    await this.#start(this.#part + 1);
  }

  /** Marks the current part's end in its index (a closing writer's: the next one may append after it). */
  async markEnd(): Promise<void> {
    await this.#index?.seal(this.#count + 1, this.#edge);
  }

  /** Closes every file (after a failed open too) and frees the codec. */
  close(): Promise<void> {
    return this.#closeFiles();
  }

  async #start(part: number): Promise<void> {
    const driver = this.#driver;
    const queue = this.#queue;
    // Making a directory is not a fenced write: a writer that lost its lock must not make the
    // next part's (readers and the next writer take the newest part directory for the current one once this writer is gone).
    await this.#lock.assertHeld?.();
    await driver.mkdir(partDir(queue, part));
    const log = await this.#openLog(partPath(queue, part));
    const pushInfo = await this.#openRecord(pushInfoPath(queue, part));
    this.#log = log;
    this.#pushInfo = pushInfo;
    this.#index = await PartIndexWriter.create(driver, queue, part, this.#options.indexInterval, this.#lock);
    this.#part = part;
    this.#edge = 0;
    this.#count = 0;
    this.#newCodec();
    await log.truncate(0);
    await this.#writePushInfo();
    if (this.#options.durability !== "none") {
      await pushInfo.sync();
      await driver.syncDir?.(partDir(queue, part));
      await driver.syncDir?.("");
    }
    // Readers follow the queue info line: name the new part only once it exists.
    await this.#writeQueueInfo();
  }

  /** A file of the queue's, opened (made if missing) with the writer's lock as the fence of every write (storage/fence.ts). */
  async #openLog(path: string): Promise<LogFile> {
    return fencedLog((await openSharedLog(this.#driver, path, { create: true }))!, this.#lock);
  }

  async #openRecord(path: string): Promise<RecordFile> {
    return fencedRecord((await openSharedRecord(this.#driver, path, { create: true }))!, this.#lock);
  }

  async #writePushInfo(): Promise<void> {
    this.#report(this.#part, this.#edge, this.#count);
    const line = formatPushInfo({ queue: this.#queue, edge: this.#edge, count: this.#count });
    await this.#pushInfo!.replace(ascii.encode(line));
  }

  async #writeQueueInfo(): Promise<void> {
    await this.#queueInfo!.replace(ascii.encode(formatQueueInfo({ queue: this.#queue, part: this.#part })));
    if (this.#options.durability !== "none") await this.#queueInfo!.sync();
  }

  /** The current part's codec, when it is written compressed (v3). */
  #newCodec(): void {
    this.#codec?.free();
    const {
      compression,
      compressionLevel: level,
      compressionMinBytes: minBytes,
      compressionSampleBytes: sampleBytes,
      compressionDictionary: dictionary,
      durability,
      zstd,
    } = this.#options;
    this.#codec =
      compression === "zstd"
        ? new PartEncoder({
            driver: this.#driver,
            queue: this.#queue,
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

  async #closeFiles(options: { keepQueueInfo?: boolean } = {}): Promise<void> {
    const files = [this.#log, this.#pushInfo, this.#index, options.keepQueueInfo ? undefined : this.#queueInfo];
    this.#codec?.free();
    this.#codec = undefined;
    this.#log = this.#pushInfo = this.#index = undefined;
    if (!options.keepQueueInfo) this.#queueInfo = undefined;
    await Promise.all(files.map((file) => file?.close()));
  }
}
