import type { DriverLock } from "../../core/driver";
import { MAX_LEASE_MS, type ResolvedSharedOptions } from "../../options/shared";
import { clearInbox, INBOX_CHECK_MS, readInbox } from "../state/ack-inbox";
import { isBelow } from "../state/shared-state";
import type { NackOptions } from "../types";
import type { SharedJournal } from "./journal";
import type { SharedWindow, WindowEntry } from "./window";

/** The consumer whose inbox is applied: what the inbox reads of it, and the two calls it makes. */
export interface InboxConsumer {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedSharedOptions;
  /** The consumer's lock: the fence of the inbox files' removal. */
  readonly lock: DriverLock;
  readonly window: SharedWindow;
  readonly journal: SharedJournal;
  /** Gives back a lease still running here, as `nack` does (it may dead-letter the message). */
  nack: (entry: WindowEntry, options: NackOptions) => Promise<void>;
  /** Acknowledges entries of the window, in one journal write. */
  ack: (entries: WindowEntry[]) => Promise<void>;
}

/**
 * A shared consumer's inbox (consumers/state/ack-inbox.ts): the acks, nacks and extends that
 * other instances took for it, applied at open, every INBOX_CHECK_MS, and when a poll asks.
 */
export class SharedInbox {
  readonly #consumer: InboxConsumer;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #check: Promise<void> | undefined;
  /** When the last read began: a lease that ran out after it may have an ack or extend there not read yet. */
  #readAt = 0;
  #closed = false;

  constructor(consumer: InboxConsumer) {
    this.#consumer = consumer;
  }

  get readAt(): number {
    return this.#readAt;
  }

  /** Applies the inbox (a failure is told and tried again), then looks again after `INBOX_CHECK_MS`. */
  check(): Promise<void> {
    this.#check = this.#apply()
      .catch((error: unknown) => {
        const { name, queue, options } = this.#consumer;
        const why = error instanceof Error ? error.message : String(error);
        options.onProblem({
          code: "INBOX_FAILED",
          queue,
          consumer: name,
          message: `Shared consumer "${name}" could not apply what its inbox holds (${why}); trying again.`,
        });
      })
      .finally(() => {
        this.#check = undefined;
        if (this.#closed) return;
        this.#timer = setTimeout(() => void this.check(), INBOX_CHECK_MS);
        (this.#timer as { unref?: () => void }).unref?.();
      });
    return this.#check;
  }

  /** Reads the inbox now (or waits for the read under way). */
  now(): Promise<void> {
    if (this.#check) return this.#check;
    clearTimeout(this.#timer);
    return this.check();
  }

  /** No read from now on; resolves once the one under way is done. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#check;
  }

  /**
   * What other instances took for this consumer. An ack of a message this or an earlier holder
   * handed out is taken whoever holds it now (the work is done); one of a message never handed
   * out is no lease's, and is dropped. A nack or an extend applies to a lease that is still
   * running here. Written, then the files go.
   */
  async #apply(): Promise<void> {
    const { queue, name, options, lock, window, journal } = this.#consumer;
    this.#readAt = Date.now();
    const { files, items } = await readInbox(options.driver, queue, name, options.onProblem);
    if (files.length === 0 || this.#closed) return;
    const entries = new Set<WindowEntry>();
    const waits: Promise<unknown>[] = [];
    const ahead = new Set<string>();
    for (const item of items) {
      if (item.kind === "commit") continue; // an ordered consumer's: none is written here
      const { ref } = item;
      // Below the floor: done. Older than this consumer: a deleted namesake's lease, no message here.
      if (isBelow(ref.key, journal.floor) || journal.bornAfter(ref.lease)) continue;
      const entry = window.get(ref.key);
      // A lease that ran out while the item waited here, and did not go out again since, is still
      // the worker's: its nack or extend counts (posted in time, read late).
      const running = entry?.state === "leased" && entry.lease === ref.lease && entry.until !== Infinity;
      if (item.kind === "nack") {
        if (running) waits.push(this.#consumer.nack(entry, { ...item, delayMs: Math.min(item.delayMs, MAX_LEASE_MS) }).catch(() => {})); // moved meanwhile: nothing to give back
      } else if (item.kind === "extend") {
        if (running) entry.until = Math.min(Math.max(entry.until, item.until), Date.now() + MAX_LEASE_MS);
      } else if (entry) {
        if (entry.state === "acked") waits.push(entry.acking ?? Promise.resolve());
        // Moving to the dead-letter queue (until Infinity): acked by that move.
        else if (entry.deliveries > 0 && entry.until !== Infinity) entries.add(entry);
      } else if (!journal.ackedBefore(ref.part, ref.offset, ref.key) && journal.handedOutBefore(ref.part, ref.offset, ref.key)) ahead.add(ref.key);
    }
    if (entries.size > 0) waits.push(this.#consumer.ack([...entries]));
    // Not written: the inbox keeps them, and the next check tries again.
    if (ahead.size > 0) waits.push(journal.ackAhead([...ahead]));
    await Promise.all(waits);
    // Fenced: a holder whose lock was taken over meanwhile leaves the files to its successor.
    await clearInbox(options.driver, files, lock);
  }
}
