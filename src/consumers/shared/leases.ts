import { VQueueError } from "../../core/errors";
import { messageKey, nextLeaseId } from "../state/shared-state";
import type { LeaseRef } from "../types";
import type { SharedJournal } from "./journal";
import type { SharedWindow, WindowEntry } from "./window";

/**
 * A shared consumer's lease ids, and whether a worker's lease still names what it names: the
 * checks of `ack`, `nack` and `extend`, each refusal an `E_LEASE` that says why.
 */
export class SharedLeases {
  readonly #queue: string;
  readonly #name: string;
  readonly #window: SharedWindow;
  readonly #journal: SharedJournal;
  /**
   * The last lease id given. Lease ids grow across restarts too (from the clock, in thousandths
   * of a ms): a lease of an earlier process is always below this one's, a made-up one from the
   * future is refused. Never below the consumer's birth (`B` line), whose clock may be ahead of this host's.
   */
  #last: number;

  constructor(queue: string, name: string, window: SharedWindow, journal: SharedJournal) {
    this.#queue = queue;
    this.#name = name;
    this.#window = window;
    this.#journal = journal;
    this.#last = Math.max(nextLeaseId(), journal.born);
  }

  /** A new lease id, above every one given before. */
  next(): number {
    return (this.#last = nextLeaseId(this.#last));
  }

  /**
   * The entry `ref` leases now, for `what` (nack, extend): `E_LEASE` when its lease is no longer
   * running. `ranOut`: one that ran out and did not go out again since still counts (an inbox's
   * nack or extend, posted in time and read late).
   */
  leased(ref: LeaseRef, what: string, ranOut = false): WindowEntry {
    const key = messageKey(ref.part, ref.offset);
    if (this.#journal.bornAfter(ref.lease)) throw this.earlierConsumer(key, ref, what);
    const entry = this.#window.get(key);
    if (!entry || entry.state !== "leased" || entry.lease !== ref.lease || entry.until === Infinity || (!ranOut && entry.until <= Date.now())) {
      const why =
        !entry || entry.state === "acked"
          ? "it is acknowledged"
          : entry.lease !== ref.lease
            ? "it was handed out again since"
            : entry.until === Infinity
              ? "it is moving to the dead-letter queue"
              : "the lease ran out";
      throw new VQueueError("E_LEASE", `Cannot ${what} ${key} (lease ${ref.lease}) of queue "${this.#queue}", consumer "${this.#name}": ${why}.`);
    }
    return entry;
  }

  /**
   * Why an ack of `entry` with `ref` is refused, if it is: never handed out (a lease this process
   * never gave), with another worker now (a newer lease still running), or moving to the
   * dead-letter queue. A lease that ran out is still taken while nobody else holds the message:
   * its work is done.
   */
  ackRefusal(entry: WindowEntry, ref: LeaseRef): VQueueError | undefined {
    if (entry.state === "acked") return undefined;
    if (entry.deliveries === 0 || !Number.isSafeInteger(ref.lease) || ref.lease < 1 || ref.lease > this.#last) return this.notHandedOut(entry.key);
    if (entry.state !== "leased" || (entry.lease === ref.lease && entry.until !== Infinity)) return undefined;
    const why =
      entry.until === Infinity
        ? "it is moving to the dead-letter queue"
        : entry.until > Date.now()
          ? `it is with another worker now (lease ${entry.lease})`
          : undefined;
    return why === undefined
      ? undefined
      : new VQueueError("E_LEASE", `Cannot ack ${entry.key} (lease ${ref.lease}) of queue "${this.#queue}", consumer "${this.#name}": ${why}.`);
  }

  /** The refusal of a lease of an earlier consumer of this name (see `SharedJournal.bornAfter`). */
  earlierConsumer(key: string, ref: LeaseRef, what: string): VQueueError {
    return new VQueueError(
      "E_LEASE",
      `Cannot ${what} ${key} (lease ${ref.lease}) of queue "${this.#queue}": the lease is from an earlier consumer "${this.#name}", deleted since (alone or with its queue); this one was created anew and has not handed it out.`,
    );
  }

  notHandedOut(key: string): VQueueError {
    return new VQueueError("E_LEASE", `Cannot ack ${key} of queue "${this.#queue}": consumer "${this.#name}" has not handed it out.`);
  }
}
