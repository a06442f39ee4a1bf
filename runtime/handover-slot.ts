/**
 * An ordinary queue's consumer, held by this server as one partition's is (a PartitionSet of one,
 * whose partition is the queue itself): taken from the instance that holds it by request (its
 * want marker), and let go when another instance asks for it, once what it handed out is
 * committed (acknowledged), or after `handoffGraceMs` (then the new holder delivers it again).
 * The slot stops then, and this server's next request for the consumer asks for it back.
 */
import { readInboxAtPace, type InboxReads } from "../src/consumers/state/inbox-pace";
import type { QueueDriver } from "../src/core/driver";
import { resolveHandoffOptions } from "../src/instances/handoff";
import { PartitionSet } from "../src/partitions/set";
import { consumerWantPath } from "../src/storage/paths";

/** What a slot does for a hand-over: ends its waits and hands nothing more out (`drain`), and stops (closing its consumer). */
export interface HandoverSlot {
  /** A read (or a move) in flight: what it hands out is not counted in `busy` yet. */
  readonly reading: boolean;
  drain(): void;
  stop(reason: "closed"): Promise<void>;
}

export interface HandoverHooks<T, S extends HandoverSlot> {
  driver: QueueDriver;
  queue: string;
  name: string;
  /** "consumer" or "shared consumer", for messages. */
  kind: string;
  /** Opens the consumer (`E_LOCKED` when another holder has it). */
  open(): Promise<T>;
  /** Handed-out messages not yet committed (acknowledged): let go only after them, or after the grace. */
  busy(item: T): boolean;
  /**
   * Run at open and at the inbox pace while held (src/consumers/state/inbox-pace.ts): applies what
   * other instances took for it (their commits); resolves with the inbox files read.
   */
  inbox?(item: T): Promise<number>;
  /** Called when the holder is asked to let go, before it waits for its handed-out messages (to hurry the inbox it has of its own). */
  onReleasing?(item: T): void;
  /** Called when the consumer is held by another instance and asked for (after a first try found it held). */
  onAsking?(): void;
  /** The slot of the consumer taken; `onStopped` is for it to call once it stopped (the hand-over watch ends). */
  slot(item: T, onStopped: () => void): S;
}

/** The consumer's slot, taken (by request, `E_LOCKED` after `handoffTimeoutMs` from a holder that does not hand over). */
export async function takeHandoverSlot<T, S extends HandoverSlot>(hooks: HandoverHooks<T, S>): Promise<S> {
  const handoff = resolveHandoffOptions({});
  let slot: S | undefined;
  const set = new PartitionSet<T>({
    driver: hooks.driver,
    queue: hooks.queue,
    count: 1,
    partition: () => hooks.queue,
    wantPath: (queue) => consumerWantPath(queue, hooks.name),
    what: (queue) => `The ${hooks.kind} "${hooks.name}" of queue "${queue}"`,
    open: async () => {
      const item = await hooks.open();
      // What another instance took for it comes first (a failure: next round).
      await hooks.inbox?.(item).catch(() => {});
      return item;
    },
    // A read in flight first: the messages it returns are handed out, then committed, before the consumer goes.
    busy: (item) => (slot?.reading ?? false) || hooks.busy(item),
    // The slot closes the consumer, once its requests in flight end.
    close: async () => slot?.stop("closed"),
    // Asked for: what it handed out is most often committed (acked) through the asker, into its inbox.
    onReleasing: (held) => {
      slot?.drain();
      inboxReads?.hurry();
      hooks.onReleasing?.(held.item);
    },
    minHoldMs: handoff.minHoldMs,
    // The registry closes idle slots (consumerIdleMs): none let go here for idleness.
    idleMs: 24 * 3600_000,
    graceMs: handoff.handoffGraceMs,
  });
  let inboxReads: InboxReads | undefined;
  // Not awaited: a stop that a release started is awaited by that release (set.close waits for it).
  const onStopped = () => {
    inboxReads?.stop();
    void set.close().catch(() => {});
  };
  try {
    // Free (or held here already): taken at once; held by another instance: asked for, and said so first.
    const taken = (await set.tryTake(0)) ?? (hooks.onAsking?.(), await set.take(0, handoff.handoffTimeoutMs));
    if (hooks.inbox) {
      // Also while it is let go: a commit taken elsewhere ends the wait for it.
      inboxReads = readInboxAtPace(() => hooks.inbox!(taken.item));
    }
    slot = hooks.slot(taken.item, onStopped);
    return slot;
  } catch (error) {
    onStopped();
    throw error;
  }
}
