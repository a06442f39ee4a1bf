import type { DriverLock, QueueDriver } from "../../core/driver";
import type { QueueProblem } from "../../core/errors";
import { encodeNextId, OutcomeFrames, outcomeHead, type OutcomeDetails, type OutcomeKind, type OutcomeSubject } from "../../format/outcome";
import type { OutcomeRetention } from "../../options/shared";
import { forEachFrame, SideLog } from "../../storage/side-log";
import { sharedOutcomesJournalPath, sharedOutcomesPath } from "../../storage/paths";
import { notifyOutcomes, outcomeWakeKey } from "./outcome-wake";

/** How soon after an append with `sync` it is fsync'd (see `flush`). */
const SYNC_EVERY_MS = 200;
/** Past this size the log is compacted whatever its count, keeping the newest events within half of it. */
const MAX_LOG_BYTES = 64 * 1024 * 1024;
/**
 * Compacted once it holds this many times `keep` events: a compaction (a read of the log, the
 * copy of `keep` events and its fsyncs, in a journal round) then comes every three `keep` of
 * acks, not every one.
 */
const COMPACT_AT = 4;

/**
 * A shared consumer's outcome log (format/outcome.ts), written by the holder of its lock: events
 * are recorded in memory and appended together at the next `flush`, which the journal's round
 * runs beside its own append, so an ack's `completed` event is durable when the ack is. Kept
 * bounded: once it holds `COMPACT_AT` times `keep` events (or `MAX_LOG_BYTES`), or its oldest is older than
 * 1.25 `keepMs`, it is rewritten with the newest `keep` events of the last `keepMs`.
 */
export class OutcomeLog {
  readonly #log: SideLog;
  readonly #retention: OutcomeRetention;
  readonly #wakeKey: string;
  readonly #onProblem: (problem: QueueProblem) => void;
  readonly #queue: string;
  /** A compaction failed: the file may be cut or half written, and nothing more goes to it (acks go on). */
  #stopped = false;
  #next: number;
  /** Events in the file, and when its oldest happened. */
  #count: number;
  #oldestAt: number | undefined;
  /** Recorded since the last flush, framed already. */
  #pending = new OutcomeFrames();
  /** When the first of those happened. */
  #pendingAt = 0;
  /** Flushes one after another (a compaction reads the file and rewrites it in one of them). */
  #chain: Promise<unknown> = Promise.resolve();
  #syncTimer: ReturnType<typeof setTimeout> | undefined;
  /** The last flush, failure included: a flush with nothing of its own waits for the one that took its events. */
  #last: Promise<void> = Promise.resolve();

  private constructor(
    log: SideLog,
    retention: OutcomeRetention,
    wakeKey: string,
    onProblem: (problem: QueueProblem) => void,
    queue: string,
    next: number,
    count: number,
    oldestAt: number | undefined,
  ) {
    this.#log = log;
    this.#onProblem = onProblem;
    this.#queue = queue;
    this.#retention = retention;
    this.#wakeKey = wakeKey;
    this.#next = next;
    this.#count = count;
    this.#oldestAt = oldestAt;
  }

  /** Opens the log of consumer `name` of `queue` (a torn tail is cut off and reported); `fence`: the consumer's lock. */
  static async open(
    driver: QueueDriver,
    queue: string,
    name: string,
    retention: OutcomeRetention,
    onProblem: (problem: QueueProblem) => void,
    fence: DriverLock | undefined,
  ): Promise<OutcomeLog> {
    const path = sharedOutcomesPath(queue, name);
    const { log, frames } = await SideLog.open(driver, path, queue, onProblem, fence, sharedOutcomesJournalPath(queue, name));
    let next = 1;
    let count = 0;
    let oldestAt: number | undefined;
    for (const frame of frames) {
      const decoded = outcomeHead(frame.payload);
      if (decoded === undefined) continue;
      if ("next" in decoded) next = Math.max(next, decoded.next);
      else {
        next = Math.max(next, decoded.id + 1);
        count++;
        oldestAt ??= decoded.at;
      }
    }
    return new OutcomeLog(log, retention, outcomeWakeKey(driver.storageKey, path), onProblem, queue, next, count, oldestAt);
  }

  /** Records an event about `message` (a window entry is one), appended at the next `flush`; `details.valueJson` as `outcomeValueJson` checked it. */
  record(kind: OutcomeKind, message: OutcomeSubject, details?: OutcomeDetails): void {
    if (this.#stopped) return;
    const at = Date.now();
    if (this.#pending.count === 0) this.#pendingAt = at;
    this.#pending.add(kind, this.#next++, at, message, details);
  }

  /**
   * Appends what was recorded since the last flush; compacts when due. Resolves once everything
   * recorded before the call is written: a crash of the process loses none of it. With `sync` it
   * is also made durable, within `SYNC_EVERY_MS` (not at each flush: the journal's fsync is what
   * an ack waits for, and a second per round would halve a drain; a power cut may lose the
   * events of the last moments, never an ack).
   */
  flush(sync: boolean): Promise<void> {
    if (this.#pending.count === 0) return this.#last;
    const count = this.#pending.count;
    const firstAt = this.#pendingAt;
    const frames = this.#pending.take();
    const run = this.#chain.then(async () => {
      await this.#log.appendFramed(frames, false);
      if (sync) this.#syncSoon();
      this.#count += count;
      this.#oldestAt ??= firstAt;
      notifyOutcomes(this.#wakeKey);
      if (this.#compactionDue(Date.now())) await this.#compact(sync).catch((error: unknown) => this.#stop(error));
    });
    this.#chain = run.catch(() => {});
    this.#last = run;
    run.catch(() => {});
    return run;
  }

  #compactionDue(now: number): boolean {
    const { keep, keepMs } = this.#retention;
    // By age at most every keepMs / 4: an event stays from keepMs to 1.25 keepMs (until a later write).
    return this.#count > COMPACT_AT * keep || this.#log.size > MAX_LOG_BYTES || (this.#oldestAt !== undefined && this.#oldestAt < now - keepMs * 1.25);
  }

  /**
   * Rewrites the log with the newest `keep` events of the last `keepMs` (within half of
   * `MAX_LOG_BYTES`), after a `next` frame. They are the file's last frames, copied as they are.
   */
  async #compact(sync: boolean): Promise<void> {
    const { keep, keepMs } = this.#retention;
    const since = Date.now() - keepMs;
    const bytes = await this.#log.read(0, this.#log.size);
    const starts: number[] = [];
    const end = forEachFrame(bytes, (start) => starts.push(start));
    // Each frame's payload starts 4 bytes into it, and ends 4 bytes before the next one.
    let from = end;
    let kept = 0;
    let oldestAt: number | undefined;
    for (let i = starts.length - 1; i >= 0 && kept < keep; i--) {
      const start = starts[i]!;
      const stop = (i + 1 < starts.length ? starts[i + 1]! - 4 : end) - 4;
      const payload = bytes.subarray(start, stop);
      // A compaction's own frames (BEGIN, NEXT) come first in the file: the events end there.
      if (payload[0] === 0) break;
      const head = outcomeHead(payload);
      if (head !== undefined && "next" in head) break;
      if (end - (start - 4) > MAX_LOG_BYTES / 2) break;
      // A frame of a later version: kept as it is (its readers skip it).
      if (head === undefined) {
        from = start - 4;
        continue;
      }
      const { at } = head;
      if (at < since) break;
      from = start - 4;
      kept++;
      oldestAt = at;
    }
    await this.#log.rewrite([encodeNextId(this.#next)], sync, bytes.subarray(from, end));
    this.#count = kept;
    this.#oldestAt = oldestAt;
    notifyOutcomes(this.#wakeKey);
  }

  /** A failed compaction stops the log, not the acks (its events are a record, the journal is the state). */
  #stop(error: unknown): void {
    this.#stopped = true;
    this.#pending.take();
    const why = error instanceof Error ? error.message : String(error);
    this.#onProblem({
      code: "OUTCOMES_STOPPED",
      queue: this.#queue,
      message: `The outcome log of ${this.#queue} could not be compacted (${why}); no more outcomes are kept until the consumer is opened again.`,
    });
  }

  /** Waits for the flushes in flight, then closes the file. */
  /** An fsync of what was appended, `SYNC_EVERY_MS` from now, unless one is due already. */
  #syncSoon(): void {
    if (this.#syncTimer) return;
    this.#syncTimer = setTimeout(() => {
      this.#syncTimer = undefined;
      // Failed: the next flush schedules another (the events are in the file; only their durability waits).
      this.#chain = this.#chain.then(() => this.#log.sync()).catch(() => {});
    }, SYNC_EVERY_MS);
  }

  /** Waits for the flushes in flight, makes them durable, then closes the file. */
  async close(): Promise<void> {
    await this.#chain;
    if (this.#syncTimer) {
      clearTimeout(this.#syncTimer);
      this.#syncTimer = undefined;
      await this.#log.sync().catch(() => {});
    }
    await this.#log.close();
  }
}
