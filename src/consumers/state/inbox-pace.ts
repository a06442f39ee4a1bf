/**
 * When a holder reads its inbox (consumers/state/ack-inbox.ts) next: every `INBOX_CHECK_MS` while
 * nobody posts to it, every `INBOX_BUSY_CHECK_MS` for a while after a read found something.
 * Another instance that acks or commits batch after batch of this holder's waits for each verdict
 * before it takes the next batch, so the holder's pace is its pace. A holder asked to hand over
 * (its handed-out messages must be committed or acked first, most often through the asker's
 * inbox posts) hurries: it reads at once, then at the busy pace.
 */

/** How often a holder looks into an inbox nobody posted to lately: an ack waits this long at most, a lease runs far longer. */
export const INBOX_CHECK_MS = 500;
/** How often it looks while other instances post to it. */
export const INBOX_BUSY_CHECK_MS = 20;
/** How long after a read that found something the holder keeps the busy pace. */
export const INBOX_BUSY_FOR_MS = 2000;

/** One holder's pace: told what each read found, it says how long to wait before the next. */
export class InboxPace {
  #foundAt = Number.NEGATIVE_INFINITY;

  /** From now on, the busy pace (for `INBOX_BUSY_FOR_MS`, or longer as reads find files). */
  hurry(): void {
    this.#foundAt = Date.now();
  }

  /** The wait before the next read, after one that found `files` inbox files (0 also for a read that failed). */
  next(files: number): number {
    const now = Date.now();
    if (files > 0) this.#foundAt = now;
    return now - this.#foundAt < INBOX_BUSY_FOR_MS ? INBOX_BUSY_CHECK_MS : INBOX_CHECK_MS;
  }
}

/** Inbox reads at the inbox pace (`readInboxAtPace`). */
export interface InboxReads {
  /** Reads at once (after the read under way, if any), then at the busy pace. */
  hurry(): void;
  /** No read from now on. */
  stop(): void;
}

/**
 * Runs `read` (it resolves with the inbox files it found) at the inbox pace, one at a time, until
 * stopped; a failed read is tried again at the idle pace. Timers are unref'd: a holder never keeps
 * its process alive for its inbox.
 */
export function readInboxAtPace(read: () => Promise<number>): InboxReads {
  const pace = new InboxPace();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let reading = false;
  let stopped = false;
  const run = () => {
    timer = undefined;
    reading = true;
    const next = (files: number) => {
      reading = false;
      schedule(pace.next(files));
    };
    read().then(next, () => next(0));
  };
  const schedule = (delayMs: number) => {
    if (stopped) return;
    timer = setTimeout(run, delayMs);
    (timer as { unref?: () => void }).unref?.();
  };
  schedule(INBOX_CHECK_MS);
  return {
    hurry() {
      pace.hurry();
      if (stopped || reading) return;
      clearTimeout(timer);
      schedule(0);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
