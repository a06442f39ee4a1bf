import type { QueueConsumer } from "../ordered/consumer";
import { comparePositions, type ConsumerPosition } from "../../format/position";
import type { QueueProblem } from "../../core/errors";
import type { Message } from "../../format/message";
import { positionHolds } from "../../log/position-check";
import type { ResolvedSharedOptions } from "../../options/shared";
import {
  AckRanges,
  ackLine,
  ackLines,
  bornLine,
  deadLetteredLine,
  deliveryLine,
  isBelow,
  markLine,
  messageKey,
  rangeLine,
  SharedState,
  startsBelow,
  type SharedSnapshot,
} from "../state/shared-state";
import type { SharedWindow, WindowEntry } from "./window";
import { GroupCommit } from "./group-commit";
import type { MessageAttributes } from "../../format/attributes";
import { RateLimiter } from "./limiter";
import { OutcomeLog } from "./outcome-log";
import { GroupLimiter } from "./group-limiter";

/**
 * The journal is folded into a new snapshot once it is this large, and larger than the last
 * snapshot, and the floor has moved. A large snapshot (many acks above the floor: messages of a
 * priority acknowledged ahead of the head) is so not written again at every 64 KiB of journal:
 * the snapshots written add up to no more than about twice the journal's bytes.
 */
const COMPACT_BYTES = 64 * 1024;
/**
 * While messages are tracked above it, the floor (pop line) is saved at most this often, and
 * before each compaction: each save is a write and an fsync in the commit chain, and until it
 * the journal's ack lines say the same (a restart loads them). Saved at once when nothing is
 * left above it, and at close; a consumer that stops mid-way saves its last floor after this long.
 */
const FLOOR_SAVE_MS = 200;

/**
 * What a shared consumer keeps above its floor (acks, delivery counts, the high-water mark)
 * names messages by part and offset: it describes the queue's records only while the floor
 * and the mark still name the positions they named. Not when the floor was moved at open (its
 * saved position was not trusted), nor when the mark no longer holds (the parts were cut short
 * or written again under it): then it is dropped and said, and those messages are handed out
 * again rather than taken for acknowledged ones.
 */
async function dropIfStale(inner: QueueConsumer, loaded: SharedSnapshot, onProblem: (problem: QueueProblem) => void): Promise<void> {
  const { mark } = loaded;
  const kept = loaded.acked.size + loaded.deliveries.size + loaded.ranges.all.length;
  if (kept === 0 && !mark) return;
  const markAbove = mark !== undefined && comparePositions(mark, inner.committed) > 0;
  const why = inner.savedPositionReset
    ? "its saved floor was not trusted"
    : markAbove && !(await positionHolds(inner.options.driver, inner.queue, mark))
      ? `its high-water mark (part ${mark.part}, byte ${mark.position}, after ${mark.count} records) names no record that follows it`
      : undefined;
  if (!why) return;
  loaded.acked.clear();
  loaded.deliveries.clear();
  loaded.ranges = new AckRanges();
  loaded.mark = undefined;
  onProblem({
    code: "BAD_POSITION",
    queue: inner.queue,
    message: `Shared consumer "${inner.name}": ${why} (the queue's parts were cut short or written again); its ${kept} ack and delivery line(s) above the floor are dropped, and those messages are handed out again.`,
  });
}

/**
 * A shared consumer's store (consumers/state/shared-state.ts holds its file format): the lines
 * it writes, in group commits (one append, fsync'd with `syncCommits`, per round); after each
 * round the floor moves over the acknowledged front of the window and is saved (the ordered
 * consumer's pop line), and a large journal is folded into a snapshot. It also answers for what
 * the files said of the messages the head has not read again (acks, counts, the mark, the birth).
 */
export class SharedJournal {
  readonly #inner: QueueConsumer;
  readonly #state: SharedState;
  readonly #window: SharedWindow;
  /** Acks and counts from the files, for messages the head has not read again yet. */
  readonly #loaded: SharedSnapshot;
  readonly #commits: GroupCommit<WindowEntry>;
  #floor: ConsumerPosition;
  /** The high-water mark: every message before it was handed out (`W` lines). */
  #mark: ConsumerPosition | undefined;
  #floorSavedAt = 0;
  /** A round's write failed: the next one writes the window's counts again first (`#countLines`). */
  #restate = false;
  #floorTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** Moved to the dead-letter queue by this process (the files count those before). */
  #deadLettered = 0;
  /** The rate limit's window and the back-off, kept in these files for the next holder. */
  readonly limiter: RateLimiter;
  /** What became of the messages handed out (outcome-log.ts), written in the rounds of this journal; none when not kept. */
  readonly outcomes: OutcomeLog | undefined;
  /** The per-group rate limit's windows, kept in these files too. */
  readonly groupLimiter: GroupLimiter;

  private constructor(
    inner: QueueConsumer,
    state: SharedState,
    loaded: SharedSnapshot,
    window: SharedWindow,
    options: ResolvedSharedOptions,
    outcomes: OutcomeLog | undefined,
  ) {
    this.#inner = inner;
    this.limiter = new RateLimiter(options.limiter, loaded);
    this.groupLimiter = new GroupLimiter(options.groupLimiter, loaded.groupTaken);
    this.outcomes = outcomes;
    this.#state = state;
    this.#loaded = loaded;
    this.#window = window;
    this.#floor = inner.committed;
    this.#mark = loaded.mark;
    this.#commits = new GroupCommit<WindowEntry>({
      // An ack's outcome event is durable when the ack is: both appends in the round.
      write: async (lines, acked) => {
        // After a round that failed: its counts (a 0 the mark passed, say) may be lost while the
        // mark it raised in memory is written by a later round: the window's counts first.
        const restate = this.#restate;
        if (restate) lines = this.#countLines(this.#mark) + lines;
        try {
          await Promise.all([state.append(lines + ackLines(acked.sort(byPosition))), outcomes?.flush(options.syncCommits)]);
        } catch (error) {
          this.#restate = true;
          throw error;
        }
        if (restate) this.#restate = false;
      },
      written: (acked) => {
        for (const entry of acked) {
          entry.persisted = true;
          entry.message = undefined;
          // Taken ahead of the head: kept as a loaded ack until the head reads it (track passes it then).
          if (window.forgetAhead(entry)) loaded.acked.add(entry.key);
        }
      },
      // Not written: not acknowledged. It comes again (at-least-once); the caller sees why.
      failed: (acked) => {
        for (const entry of acked) Object.assign(entry, { state: "ready", until: 0, acking: undefined });
      },
      after: () => this.#afterWrite(),
    });
  }

  /**
   * Loads the files of `inner`'s shared state (the window is still empty), drops what no longer
   * describes the queue, and writes a fresh snapshot with an empty journal (a torn line goes).
   */
  static async open(inner: QueueConsumer, options: ResolvedSharedOptions, window: SharedWindow): Promise<SharedJournal> {
    const state = new SharedState(options.driver, inner.queue, inner.name, options.syncCommits, inner.lock);
    const loaded = await state.load(options.onProblem);
    await dropIfStale(inner, loaded, options.onProblem);
    // Lines below the floor mean nothing, and the head never reads those messages again: not kept.
    for (const key of loaded.acked) if (isBelow(key, inner.committed)) loaded.acked.delete(key);
    for (const key of loaded.deliveries.keys()) if (isBelow(key, inner.committed)) loaded.deliveries.delete(key);
    const outcomes = options.outcomes && (await OutcomeLog.open(options.driver, inner.queue, inner.name, options.outcomes, options.onProblem, inner.lock));
    const journal = new SharedJournal(inner, state, loaded, window, options, outcomes);
    try {
      await state.compact(journal.#snapshotLines());
    } catch (error) {
      await outcomes?.close().catch(() => {});
      throw error;
    }
    return journal;
  }

  /** The ack floor: every message before it is acknowledged (not a copy). */
  get floor(): ConsumerPosition {
    return this.#floor;
  }

  /** Lease ids at or below it are an earlier consumer's of this name (`B` line). */
  get born(): number {
    return this.#loaded.born;
  }

  /** Whether `lease` is a lease of an earlier consumer of this name, deleted since (`B` line). */
  bornAfter(lease: number): boolean {
    return lease <= this.#loaded.born;
  }

  /** Messages moved to the dead-letter queue by this process. */
  get deadLettered(): number {
    return this.#deadLettered;
  }

  /** Messages moved to the dead-letter queue since the consumer was created. */
  get deadLetteredTotal(): number {
    return this.#loaded.deadLettered + this.#deadLettered;
  }

  /**
   * Writes `lines`, and the acks of `acked` (rendered as ranges), in the next round; resolves
   * once they are durable. Not written: `acked` go back to ready. `""` and none: a round only
   * moves and saves the floor.
   */
  write(lines: string, acked?: readonly WindowEntry[]): Promise<void> {
    return this.#commits.add(lines, acked);
  }

  /** The high-water mark: every message before it was handed out, but those with a count of their own (0 for some). */
  get mark(): ConsumerPosition | undefined {
    return this.#mark;
  }

  /** The line that raises the high-water mark to `mark`, or "" when it is not above it. */
  markLine(mark: ConsumerPosition | undefined): string {
    if (!mark || (this.#mark && comparePositions(mark, this.#mark) <= 0)) return "";
    this.#mark = mark;
    return markLine(mark);
  }

  /** Adds messages the head read to the window, each with the count and the ack the files hold for it, and its attributes. */
  track(batch: readonly Message[], attributes?: readonly (MessageAttributes | undefined)[]): void {
    let anyAcked = false;
    for (let i = 0; i < batch.length; i++) {
      const message = batch[i]!;
      const { deliveries, acked } = this.#takeLoaded(message);
      anyAcked ||= acked;
      this.#window.add(message, deliveries, acked, attributes?.[i]);
    }
    if (anyAcked) void this.#commits.add("").catch(() => {});
  }

  /** Adds a message of a priority ahead of the head (hand-out.ts), unless it was acknowledged before. */
  trackAhead(message: Message, attributes: MessageAttributes | undefined): boolean {
    if (this.ackedBefore(message.part, message.offset, messageKey(message.part, message.offset))) return false;
    this.#window.addAhead(message, this.#takeLoaded(message).deliveries, attributes);
    return true;
  }

  /** What the files said of a message not tracked yet: its count and its ack (then forgotten here: the window keeps them). */
  #takeLoaded(message: Message): { deliveries: number; acked: boolean } {
    const loaded = this.#loaded;
    const key = messageKey(message.part, message.offset);
    // Below the loaded mark without a count of its own: handed out once.
    const deliveries = loaded.deliveries.get(key) ?? (startsBelow(message.part, message.offset, loaded.mark) ? 1 : 0);
    loaded.deliveries.delete(key);
    // Acknowledged before a restart: tracked (the floor passes it), never handed out again.
    const acked = loaded.acked.delete(key) || loaded.ranges.has(message.part, message.offset);
    return { deliveries, acked };
  }

  /**
   * Acknowledged before a restart, and not read again yet: an ack sent again (its answer was
   * lost with the server that wrote it) is done, not refused.
   */
  ackedBefore(part: number, offset: number, key: string): boolean {
    return this.#loaded.acked.has(key) || this.#loaded.ranges.contains(part, offset);
  }

  /** Whether the message at `part`/`offset`, not in the window, was handed out (by this or an earlier holder). */
  handedOutBefore(part: number, offset: number, key: string): boolean {
    return (this.#loaded.deliveries.get(key) ?? (startsBelow(part, offset, this.#mark) ? 1 : 0)) > 0;
  }

  /**
   * Acknowledges messages the head has not read yet, handed out before (an earlier holder's
   * leases): as a restart's loaded acks are (`track` passes them), with their lines written.
   */
  ackAhead(keys: string[]): Promise<void> {
    const fresh = keys.filter((key) => !this.#loaded.acked.has(key));
    for (const key of fresh) this.#loaded.acked.add(key);
    return this.#commits.add(keys.map(ackLine).join("")).catch((error: unknown) => {
      for (const key of fresh) this.#loaded.acked.delete(key);
      throw error;
    });
  }

  /** What the files count for a message handed out before and not read again yet (1 when only the mark says it went out). */
  deliveriesBefore(key: string): number {
    return this.#loaded.deliveries.get(key) ?? 1;
  }

  /** Counts a message moved to the dead-letter queue: the line to write with its ack. */
  countDeadLetter(): string {
    this.#deadLettered++;
    return deadLetteredLine(this.deadLetteredTotal);
  }

  /**
   * Once `drained` resolves (nothing else writes then): waits for the writes in flight, saves
   * the floor and a snapshot, and closes the journal. No floor save is put off from now on.
   */
  async close(drained: Promise<unknown>): Promise<void> {
    this.#closed = true;
    try {
      await drained;
      await this.#commits.idle();
      clearTimeout(this.#floorTimer);
      await this.#afterWrite(true).catch(() => {});
      await this.#compact().catch(() => {});
    } finally {
      await this.outcomes?.close().catch(() => {});
      await this.#state.close().catch(() => {});
    }
  }

  /** After each journal write: the floor moves over the acknowledged front; the journal is folded when large. */
  async #afterWrite(force = false): Promise<void> {
    const last = this.#window.dropAcked();
    if (last) this.#floor = last.end;
    // Also a floor whose save failed before: tried again here.
    if (comparePositions(this.#floor, this.#inner.committed) <= 0) return;
    const compact = this.#state.journalBytes > Math.max(COMPACT_BYTES, this.#state.snapshotBytes);
    // Caught up (nothing above the floor: no message tracked, none acknowledged ahead of the head):
    // saved at once, so a quiet consumer's pop line is exact. Not while acks of messages of a
    // priority wait for the head: the window empties at each round then, and a save is an fsync.
    const above = this.#window.size > 0 || this.#loaded.acked.size > 0;
    if (!force && !compact && above && Date.now() - this.#floorSavedAt < FLOOR_SAVE_MS) return this.#saveFloorLater();
    await this.#inner.commitPosition(this.#floor);
    this.#floorSavedAt = Date.now();
    if (compact) await this.#compact();
  }

  /** A commit round after FLOOR_SAVE_MS saves the floor, if no other round did by then. */
  #saveFloorLater(): void {
    if (this.#floorTimer || this.#closed) return;
    this.#floorTimer = setTimeout(() => {
      this.#floorTimer = undefined;
      if (!this.#closed) void this.#commits.add("").catch(() => {}); // a failure: tried again at the next round
    }, FLOOR_SAVE_MS);
    (this.#floorTimer as { unref?: () => void }).unref?.();
  }

  /**
   * A new snapshot of what is above the floor. Only once the floor is saved: the entries it
   * passed have left the window, and their ack lines would be lost with the journal.
   */
  async #compact(): Promise<void> {
    if (comparePositions(this.#floor, this.#inner.committed) !== 0) return;
    await this.#state.compact(this.#snapshotLines());
  }

  /** The counts of the window's entries whose ack is not written that `mark` does not say. */
  #countLines(mark: ConsumerPosition | undefined): string {
    let lines = "";
    for (const entry of this.#window.entries()) {
      // An ack not written yet (the next round's) may fail, or the process die before it: its count stays.
      if (entry.persisted) continue;
      // Below the mark, one that never went out counts 0 (hand-out.ts); above it, one that went out counts.
      if (entry.deliveries > 1 || (entry.deliveries === 1) !== startsBelow(entry.part, entry.offset, mark)) lines += deliveryLine(entry.key, entry.deliveries);
    }
    return lines;
  }

  /** The state above the floor, as snapshot lines. */
  #snapshotLines(): string {
    const floor = this.#inner.committed;
    const mark = this.#mark && comparePositions(this.#mark, floor) > 0 ? this.#mark : undefined;
    const acked: WindowEntry[] = [];
    for (const entry of this.#window.entries()) if (entry.state === "acked" && entry.persisted) acked.push(entry);
    let lines = (mark ? markLine(mark) : "") + this.#countLines(mark);
    lines += ackLines(acked);
    for (const key of this.#loaded.acked) if (!isBelow(key, floor)) lines += ackLine(key);
    for (const range of this.#loaded.ranges.ahead()) if (!startsBelow(range.part, range.to, floor)) lines += rangeLine(range);
    for (const [key, count] of this.#loaded.deliveries) if (!isBelow(key, floor)) lines += deliveryLine(key, count);
    const deadLettered = this.deadLetteredTotal;
    if (deadLettered > 0) lines += deadLetteredLine(deadLettered);
    if (this.#loaded.born > 0) lines += bornLine(this.#loaded.born);
    const now = Date.now();
    return lines + this.limiter.lines(now) + this.groupLimiter.lines(now);
  }
}

const byPosition = (a: WindowEntry, b: WindowEntry): number => a.part - b.part || a.offset - b.offset;
