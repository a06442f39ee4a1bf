import type { DriverLock } from "../../core/driver";
import { MAX_LEASE_MS, type ResolvedSharedOptions } from "../../options/shared";
import { answerInbox, DONE, inboxItems, readInbox, refusal, type InboxItem, type Verdict } from "../state/ack-inbox";
import { InboxPace } from "../state/inbox-pace";
import { VQueueError } from "../../core/errors";
import type { LeaseRef, NackOptions } from "../types";
import type { SharedLeases } from "./leases";
import type { WindowEntry } from "./window";

/** The consumer whose inbox is applied: what the inbox reads of it, and the two calls it makes. */
export interface InboxConsumer {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedSharedOptions;
  /** The consumer's lock: the fence of the inbox files' removal. */
  readonly lock: DriverLock;
  readonly leases: SharedLeases;
  /** Gives back a lease still running here, as `nack` does (it may dead-letter the message). */
  nack: (entry: WindowEntry, options: NackOptions) => Promise<void>;
  /** Acknowledges leases as `ackAll` does: in one journal write, each one's refusal or undefined (`results`: each one's as JSON). */
  ackAll: (refs: LeaseRef[], results: readonly (string | undefined)[]) => Promise<(Error | undefined)[]>;
  /** Records a lease's progress (JSON), as `progress` does. */
  progress: (entry: WindowEntry, json: string) => Promise<void>;
  /** Backs off until then (ms since the epoch), as `backOff` does; resolves with the back-off's end. */
  backOff: (until: number) => Promise<number>;
}

/**
 * A shared consumer's inbox (consumers/state/ack-inbox.ts): the acks, nacks, extends and back-offs that
 * other instances took for it, applied at open, at the inbox pace (consumers/state/inbox-pace.ts),
 * and when a poll asks.
 */
export class SharedInbox {
  readonly #consumer: InboxConsumer;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #check: Promise<void> | undefined;
  readonly #pace = new InboxPace();
  /** When the last read began: a lease that ran out after it may have an ack or extend there not read yet. */
  #readAt = 0;
  #closed = false;

  constructor(consumer: InboxConsumer) {
    this.#consumer = consumer;
  }

  get readAt(): number {
    return this.#readAt;
  }

  /** Applies the inbox (a failure is told and tried again), then looks again at the inbox pace. */
  check(): Promise<void> {
    let files = 0;
    this.#check = this.#apply()
      .then((found) => void (files = found))
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
        this.#timer = setTimeout(() => void this.check(), this.#pace.next(files));
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

  /** The holder is asked to hand over (its leases must be acked first, often through here): reads now, then at the busy pace. */
  hurry(): void {
    this.#pace.hurry();
    if (!this.#closed) void this.now();
  }

  /** No read from now on; resolves once the one under way is done. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#check;
  }

  /**
   * What other instances took for this consumer, each decided as the call would be here: an ack
   * as `ackAll` (refused when the message went out again to another worker meanwhile), a nack or
   * an extend when its lease still runs here or ran out and did not go out again. Written, then
   * each file's verdicts, then the files go. Resolves with the number of inbox files read.
   */
  async #apply(): Promise<number> {
    const { queue, name, options, lock, leases } = this.#consumer;
    this.#readAt = Date.now();
    const read = await readInbox(options.driver, queue, name, options.onProblem);
    if (this.#closed) return 0;
    const decided = new Map<InboxItem, Verdict>();
    const acks: (InboxItem & { kind: "ack" })[] = [];
    const waits: Promise<unknown>[] = [];
    for (const item of inboxItems(read)) {
      if (item.kind === "commit") continue; // an ordered consumer's: refused (answerInbox)
      if (item.kind === "ack") {
        acks.push(item);
        continue;
      }
      if (item.kind === "backOff") {
        waits.push(
          this.#consumer.backOff(item.until).then(
            (until) => decided.set(item, { done: true, until }),
            (error: unknown) => decided.set(item, refusal(error)),
          ),
        );
        continue;
      }
      let entry: WindowEntry;
      try {
        entry = leases.leased(item.ref, item.kind, true);
      } catch (error) {
        decided.set(item, refusal(error));
        continue;
      }
      if (item.kind === "extend") {
        entry.until = Math.min(Math.max(entry.until, item.until), Date.now() + MAX_LEASE_MS);
        decided.set(item, { done: true, until: entry.until });
      } else if (item.kind === "progress") {
        waits.push(
          this.#consumer.progress(entry, item.progress).then(
            () => decided.set(item, DONE),
            (error: unknown) => decided.set(item, refusal(error)),
          ),
        );
      } else {
        waits.push(
          this.#consumer
            .nack(entry, {
              ...item,
              delayMs: item.delayMs === undefined ? undefined : Math.min(item.delayMs, MAX_LEASE_MS),
              defaultDelayMs: item.defaultDelayMs === undefined ? undefined : Math.min(item.defaultDelayMs, MAX_LEASE_MS),
            })
            .then(
              () => decided.set(item, DONE),
              (error: unknown) => decided.set(item, refusal(error)),
            ),
        );
      }
    }
    if (acks.length > 0) {
      const errors = await this.#consumer.ackAll(
        acks.map((item) => item.ref),
        acks.map((item) => item.result),
      );
      // Not written: the inbox keeps them, and the next check tries again.
      const failed = errors.find((error) => error && !(VQueueError.isError(error) && error.code === "E_LEASE"));
      if (failed) throw failed;
      acks.forEach((item, i) => decided.set(item, errors[i] ? refusal(errors[i]) : DONE));
    }
    await Promise.all(waits);
    await answerInbox(options.driver, read, decided, lock);
    return read.files.length;
  }
}
