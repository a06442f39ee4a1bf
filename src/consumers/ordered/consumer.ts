// Over 300 lines: the facade of a consumer (read, wait, poll, commit, seek, lag, close) over its
// reader, position file and lock; each call is a few lines, and they share its serial chain.
import type { ConsumerKind } from "../kind";
import { comparePositions, formatCursor, parseCursor, positionAfter, type ConsumerPosition } from "../../format/position";
import type { DriverLock, QueueDriver } from "../../core/driver";
import { VQueueError, type QueueProblem } from "../../core/errors";
import { isLockHeld, onLockLost } from "../../storage/fence";
import { queueHub } from "../../storage/hub";
import { consumerLag } from "../../inspect/queues";
import type { OrderedConsumer } from "../types";
import { iterateMessages } from "./iterate";
import type { Message } from "../../format/message";
import { openLocked } from "../../storage/open-locked";
import { assertName } from "../../core/names";
import {
  checkInteger,
  resolveConsumerOptions,
  type ConsumerOptions,
  type IterateOptions,
  type PollOptions,
  type ReadOptions,
  type ResolvedConsumerOptions,
  type WaitOptions,
} from "../../options/queue";
import { withSharedLog } from "../../storage/handles";
import { consumerLockPath, partPath } from "../../storage/paths";
import { PartReader } from "../../log/part-reader";
import { isRecordBoundary } from "../../log/position-check";
import { PositionFile } from "../state/position-file";
import { openingPosition } from "./opening-position";
import { resolveSeek, type SeekTarget } from "../../log/seek";
import { queueExists } from "../../log/recovery";
import { watchStorage } from "../../storage/watch";

export type { ReadOptions, WaitOptions, PollOptions, IterateOptions } from "../../options/queue";

/** Read ends remembered for commits (a client commits one of its last batches, rarely older). */
const READ_ENDS_KEPT = 64;

/**
 * A named reader of a queue with a saved position (`Q_info_pop_C`). Any number of consumers
 * read one queue, each at its own pace; one open reader per consumer name at a time.
 * Following the parts is `PartReader`'s, the saved position `PositionFile`'s, where it opens
 * `openingPosition`'s, waking `QueueHub`'s (in process) and `watchStorage`'s (across processes).
 */
export class QueueConsumer implements OrderedConsumer<Message, SeekTarget> {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedConsumerOptions;
  readonly #driver: QueueDriver;
  readonly #lock: DriverLock;
  readonly #reader: PartReader;
  readonly #positionFile: PositionFile;
  #committed: ConsumerPosition = { part: 0, position: 0, count: 0 };
  #commitChain: Promise<void> = Promise.resolve();
  /** Reads, refreshes and moves of the reader, one at a time (they swap file handles). */
  #serial: Promise<unknown> = Promise.resolve();
  #closed = false;
  /** The ends of the last reads (cursors): a commit of one is known good without a look at the part. */
  readonly #readEnds = new Set<string>();
  /** Messages retention deleted before this consumer read them, not yet taken (`takeMissed`). */
  #missed = 0;
  /** The consumer's problems pass here: `MISSED` is counted too. */
  readonly #onProblem = (problem: QueueProblem): void => {
    if (problem.code === "MISSED") this.#missed += problem.missed ?? 0;
    this.options.onProblem(problem);
  };

  readonly #kind: ConsumerKind;
  /** The saved position was not trusted at open (`BAD_POSITION`): it was moved, so state kept beside it may name other records. */
  #savedPositionReset = false;

  private constructor(queue: string, name: string, options: ResolvedConsumerOptions, lock: DriverLock, kind: ConsumerKind) {
    this.queue = queue;
    this.#kind = kind;
    this.name = name;
    this.options = options;
    this.#driver = options.driver;
    this.#lock = lock;
    this.#reader = new PartReader(queue, name, options.driver, { ...options, onProblem: this.#onProblem });
    this.#positionFile = new PositionFile(options.driver, queue, name, lock, options.syncCommits);
  }

  /**
   * Opens (and by default creates) consumer `name` of `queue`; takes the consumer's lock.
   * `kind` is internal: a shared consumer (consumers/shared/consumer.ts) reads through an ordered one.
   */
  static async open(queue: string, name: string, options: ConsumerOptions = {}, kind: ConsumerKind = "ordered"): Promise<QueueConsumer> {
    assertName(queue, "queue");
    assertName(name, "consumer", queue);
    const resolved = resolveConsumerOptions(options);
    // Before the lock, whose file (and the fs driver's data directory) would be made for a queue
    // that is not there: reading creates nothing. #init checks again, under the lock.
    if (!(await queueExists(resolved.driver, queue))) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
    return openLocked(
      resolved.driver,
      consumerLockPath(queue, name),
      `Consumer "${name}" of queue "${queue}" is already open (in this or another process). One reader per consumer name.`,
      (lock) => new QueueConsumer(queue, name, resolved, lock, kind),
      (consumer) => consumer.#init(),
      async (consumer) => {
        await consumer.#reader.close();
        await consumer.#positionFile.close();
      },
    );
  }

  /** Where the next `read` starts. */
  get position(): ConsumerPosition {
    return this.#reader.position;
  }

  /**
   * Calls `listener` once when this consumer's lock is lost (a lease taken over by another
   * reader of this name, found by a renewal, a check before a write, or a write the storage's
   * fence refused), at once when it is already; never for a lock that cannot be lost.
   */
  whenLockLost(listener: () => void): void {
    onLockLost(this.#lock, listener);
  }

  /**
   * Whether this consumer still holds its lock: asks the storage when the lease is stale (its
   * process was paused), false once closed or the lock is lost (it then refuses reads and
   * commits: its owner opens it again, from the saved position).
   */
  async holds(): Promise<boolean> {
    return !this.#closed && (await isLockHeld(this.#lock));
  }

  /** The consumer's lock, for what writes under it (a shared consumer's state): the fence of those writes (core/driver.ts). @internal */
  get lock(): DriverLock {
    return this.#lock;
  }

  /** Whether the saved position was reported at open and moved (`BAD_POSITION`): what a shared consumer keeps above it is not trusted either. @internal */
  get savedPositionReset(): boolean {
    return this.#savedPositionReset;
  }

  /** The reader's part and its bytes known to be complete (see `PartReader.knownEnd`). @internal */
  get knownEnd(): { part: number; bytes: number } {
    return this.#reader.knownEnd;
  }

  /** The saved position: where a reopened consumer resumes. */
  get committed(): ConsumerPosition {
    return { ...this.#committed };
  }

  /** The cursor that commits everything handed out so far. */
  get cursor(): string {
    return formatCursor(this.#reader.position);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Returns the next messages, oldest first, or [] when there is nothing new (it does not
   * wait: see `poll`, `wait` and `messages`). Damaged records are reported and skipped.
   */
  async read(options: ReadOptions = {}): Promise<Message[]> {
    this.#assertOpen();
    const max = options.max ?? 100;
    const maxBytes = options.maxBytes ?? 1024 * 1024;
    checkInteger("max", max, 1, 1_000_000);
    checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
    return this.#exclusive(async () => {
      const messages = await this.#reader.read(max, maxBytes, !options.raw);
      if (messages.length > 0) this.#noteReadEnd();
      return messages;
    });
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
    const hub = queueHub(this.#driver, this.queue);
    // Listen before checking, so a write between the check and the wait is not missed.
    const off = hub.onChange((hint) => {
      if (hint) this.#reader.applyHint(hint);
      changed = true;
      wake?.(true);
    });
    try {
      if (this.#reader.hasBuffered || (this.#reader.localEdge() ?? (await this.#exclusive(() => this.#reader.refresh()))) || changed) return true;
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
        if (!hub.hasWriter) {
          const check = () => this.#exclusive(() => (this.#closed ? Promise.resolve(false) : this.#reader.refresh()));
          cleanups.push(watchStorage(this.#driver, this.#reader.watchDirs, this.options.pollIntervalMs, check, () => wake!(true)));
        }
      });
    } finally {
      off();
    }
  }

  /**
   * The next messages, waiting up to `timeoutMs` (no limit when not given) for the first:
   * `read`, then `wait` when there is nothing, until there is, the time is up or `signal`
   * aborts ([] then). The one loop the HTTP layer, the CLI and `messages()` all use.
   */
  async poll(options: PollOptions = {}): Promise<Message[]> {
    const { signal, timeoutMs, ...readOptions } = options;
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, 2 ** 31 - 1);
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    for (;;) {
      const batch = await this.read(readOptions);
      if (batch.length > 0 || signal?.aborted) return batch;
      const remaining = deadline === undefined ? undefined : deadline - Date.now();
      if (remaining !== undefined && remaining <= 0) return [];
      if (!(await this.wait({ signal, timeoutMs: remaining }))) return [];
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
      target = upTo === undefined ? this.#reader.position : typeof upTo === "string" ? parseCursor(upTo) : positionAfter(upTo);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#commitTo(target, typeof upTo === "string" ? upTo : undefined);
  }

  /** @internal Saves a position the engine worked out itself (a shared consumer's ack floor): not looked at again. */
  commitPosition(position: ConsumerPosition): Promise<void> {
    try {
      this.#assertOpen();
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#commitTo({ ...position }, undefined);
  }

  /** `cursor`: the text of a cursor from outside, checked against the part unless known good. */
  #commitTo(target: ConsumerPosition, cursor: string | undefined): Promise<void> {
    const run = this.#commitChain.then(async () => {
      if (comparePositions(target, this.#committed) <= 0) return;
      // Between reads (which move the reader): where the target lies is decided here, not at the call.
      await this.#exclusive(async () => {
        const order = comparePositions(target, this.#reader.position);
        if (order > 0) return this.#reader.skipTo(target);
        // Inside what was handed out: a message's end with its count, or the saved position
        // would fall inside a record (the crate could not read on from it).
        if (cursor === undefined || (order === 0 ? target.count === this.#reader.position.count : this.#readEnds.has(cursor))) return;
        if (!(await this.#isMessageEnd(target))) {
          throw new VQueueError(
            "E_CURSOR",
            `Cannot commit ${formatCursor(target)}: it names no message end of queue "${this.queue}" that consumer "${this.name}" handed out.`,
          );
        }
      });
      await this.#positionFile.save(target);
      this.#committed = target;
    });
    this.#commitChain = run.catch(() => {});
    return run;
  }

  /**
   * Moves the consumer to the oldest message, the end, a cursor, a message by part and
   * sequence number, or a time (see `SeekTarget` for its precision), and saves that position
   * (backwards too: what lies after it is handed out again). Resolves with its cursor.
   */
  async seek(to: SeekTarget): Promise<string> {
    this.#assertOpen();
    return formatCursor(await this.seekTo(await resolveSeek(this.#driver, this.queue, to, this.options.onProblem)));
  }

  /** `seek` to a position `resolveSeek` gave (a partitioned seek checks every partition's target before it moves any). @internal */
  async seekTo(target: ConsumerPosition): Promise<ConsumerPosition> {
    this.#assertOpen();
    const run = this.#commitChain.then(async () => {
      await this.#exclusive(() => this.#reader.openAt(target));
      await this.#positionFile.save(target);
      this.#committed = target;
    });
    this.#commitChain = run.catch(() => {});
    await run;
    return { ...target };
  }

  #noteReadEnd(): void {
    this.#readEnds.add(formatCursor(this.#reader.position));
    if (this.#readEnds.size > READ_ENDS_KEPT) this.#readEnds.delete(this.#readEnds.values().next().value!);
  }

  /** Whether a message of the queue ends at `target` (with its count), scanned from the saved position or the part's start. */
  async #isMessageEnd(target: ConsumerPosition): Promise<boolean> {
    const from = target.part === this.#committed.part ? this.#committed : { part: target.part, position: 0, count: 0 };
    return (await withSharedLog(this.#driver, partPath(this.queue, target.part), (file) => isRecordBoundary(file, from, target))) ?? false;
  }

  /** Hands out again everything after the saved position (e.g. after a failed batch). */
  async rewind(): Promise<void> {
    this.#assertOpen();
    await this.#commitChain;
    await this.#exclusive(() => this.#reader.openAt(this.#committed));
  }

  /**
   * Messages as an async iterator that waits for new ones, until `signal` aborts or the
   * loop breaks. Commits as it goes unless `autoCommit: false` (see `IterateOptions`).
   */
  messages(options: IterateOptions = {}): AsyncGenerator<Message, void, undefined> {
    return iterateMessages(this, options);
  }

  /**
   * How many messages retention deleted before this consumer read them, since the last call
   * (each is also reported as a `MISSED` problem): for callers that pass it on, as the HTTP
   * consume answer does.
   */
  takeMissed(): number {
    const missed = this.#missed;
    this.#missed = 0;
    return missed;
  }

  /** Messages pushed but not yet committed by this consumer (from the info lines, or the part files when the writer is gone). */
  async lag(): Promise<number> {
    return consumerLag(this.#driver, this.queue, this.#committed);
  }

  /**
   * Waits for the commits in flight, closes the files and releases the lock. `beforeRelease`
   * runs in between, while nobody else can open this consumer (e.g. to remove its files).
   */
  async close(options: { beforeRelease?: () => Promise<void> } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    try {
      await this.#commitChain;
      await this.#exclusive(() => this.#reader.close());
      await this.#positionFile.close();
      await options.beforeRelease?.();
    } finally {
      await this.#lock.release();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // --- Internals ---

  #assertOpen(): void {
    if (this.#closed) throw new VQueueError("E_CLOSED", `Consumer "${this.name}" of queue "${this.queue}" is closed.`);
    // A lease lost to another reader of this name: this one must stop, not read on or commit.
    if (this.#lock.lost?.aborted) throw this.#lock.lost.reason;
  }

  #exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#serial.then(task);
    // Settled with nothing: `run.catch()` would hold the task's result (the last read's messages
    // and the chunks under their bodies) until the next call.
    this.#serial = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #init(): Promise<void> {
    const { position, reset } = await openingPosition({
      queue: this.queue,
      name: this.name,
      options: this.options,
      kind: this.#kind,
      lock: this.#lock,
      positionFile: this.#positionFile,
      onProblem: this.#onProblem,
    });
    this.#savedPositionReset = reset;
    this.#committed = position;
    await this.#reader.openAt(position);
  }
}

/** Opens consumer `name` of `queue`. See `QueueConsumer`. */
export function openConsumer(queue: string, name: string, options?: ConsumerOptions): Promise<QueueConsumer> {
  return QueueConsumer.open(queue, name, options);
}
