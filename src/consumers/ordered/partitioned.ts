/**
 * An ordered consumer of a partitioned queue, shared by many instances (docs/partitioned.md):
 * consumer `name` of each partition, held by one instance at a time; this instance
 * reads the partitions it holds, round-robin, in order within each. A partition is handed over
 * once what this instance handed out of it is committed (or after `handoffGraceMs`: then the
 * new holder delivers it again — at least once).
 */
import { InboxPoster, outcome } from "../state/ack-inbox";
import { readInboxAtPace, type InboxReads } from "../state/inbox-pace";
import { applyInboxCommits, assertCommitFits } from "./commit-inbox";
import { QueueConsumer } from "./consumer";
import { comparePositions, formatCursor, parseCursor, positionAfter, type ConsumerPosition } from "../../format/position";
import { VQueueError } from "../../core/errors";
import { isLockLost } from "../../storage/fence";
import { resolveHandoffOptions, type ConsumerHandoffOptions, type ResolvedHandoffOptions } from "../../instances/handoff";
import type { Message } from "../../format/message";
import {
  checkInteger,
  resolveConsumerOptions,
  type ConsumerOptions,
  type IterateOptions,
  type PollOptions,
  type ReadOptions,
  type ResolvedConsumerOptions,
} from "../../options/queue";
import type { OrderedConsumer } from "../types";
import { iterateMessages } from "./iterate";
import { PartitionedConsumerBase } from "../../partitions/consumer-base";
import { PartitionFan } from "../../partitions/fan";
import { formatPartitionedCursor, parsePartitionedCursor } from "../../partitions/cursor";
import { partitionName } from "../../partitions/declaration";
import { resolveSeek, type SeekTarget } from "../../log/seek";
import { listParts } from "../../log/recovery";

export interface PartitionedConsumerOptions extends ConsumerOptions, ConsumerHandoffOptions {
  /** Declares the queue with this many partitions if it is not declared yet; a declared queue must have as many. */
  partitions?: number;
}

/**
 * Where a partitioned consumer may be moved: every partition to its oldest message, its end or a
 * time, or the partitions a composite cursor names to theirs (`p0:<cursor>,p3:<cursor>`).
 */
export type PartitionedSeekTarget = "earliest" | "latest" | (string & {}) | { time: number | Date | string };

/** A message of a partitioned queue: its position is in partition `partition`. */
export type PartitionedMessage = Message & { partition: number };

export class PartitionedConsumer
  extends PartitionedConsumerBase<QueueConsumer, Message, { raw: boolean }>
  implements OrderedConsumer<PartitionedMessage, PartitionedSeekTarget>
{
  readonly handoff: ResolvedHandoffOptions;
  /** Partitions this instance handed messages out of (the cursor names only these). */
  readonly #served: Set<number>;
  /** The last commit of each partition let go: a late commit at or before it is a no-op. */
  readonly #released: Map<number, ConsumerPosition>;
  readonly #resolved: ResolvedConsumerOptions;
  /** Commits of partitions held elsewhere, to their inboxes (consumers/ordered/commit-inbox.ts). */
  readonly #inbox: InboxPoster;
  /** The reads of the held partitions' inboxes. */
  readonly #inboxReads: InboxReads;

  private constructor(queue: string, name: string, partitions: number, options: PartitionedConsumerOptions, unborn: Set<string>) {
    const handoff = resolveHandoffOptions(options);
    const { handoffTimeoutMs: _t, minHoldMs: _m, idleMs: _i, handoffGraceMs: _g, partitions: _p, ...consumerOptions } = options;
    const resolved = resolveConsumerOptions(consumerOptions);
    const released = new Map<number, ConsumerPosition>();
    const served = new Set<number>();
    // Made once `this` exists (after the fan it hurries).
    let inboxReads: InboxReads | undefined;
    const fan = new PartitionFan<QueueConsumer, Message, { raw: boolean }>({
      driver: resolved.driver,
      queue,
      name,
      partitions,
      kind: "consumer",
      handoff,
      open: async (partition) => {
        const consumer = await QueueConsumer.open(partition, name, unborn.has(partition) ? { ...consumerOptions, start: "earliest" } : consumerOptions);
        // Commits other instances took for it, before anything goes out again (a failure: next round).
        await applyInboxCommits(consumer).catch(() => {});
        return consumer;
      },
      busy: (consumer) => comparePositions(consumer.position, consumer.committed) > 0,
      // Asked for: what it handed out is most often committed through the asker, into its inbox.
      onReleasing: () => inboxReads?.hurry(),
      close: (consumer) => consumer.close(),
      whenLockLost: (consumer, listener) => consumer.whenLockLost(listener),
      take: (consumer, max, maxBytes, { raw }) => consumer.read({ max, maxBytes, raw }),
      size: (message) => message.size,
      wait: (consumer, timeoutMs, signal) => consumer.wait({ timeoutMs, signal }),
      committed: (consumer) => consumer.committed,
      onRelease: (index, consumer) => {
        served.delete(index);
        released.set(index, consumer.committed);
      },
    });
    super(queue, name, partitions, fan);
    this.handoff = handoff;
    this.#served = served;
    this.#released = released;
    this.#resolved = resolved;
    this.#inbox = new InboxPoster(resolved.driver, fan.set.id, resolved.syncCommits);
    this.#inboxReads = inboxReads = readInboxAtPace(() => this.#checkInboxes());
  }

  /** Opens consumer `name` of partitioned queue `queue` (`E_NOT_FOUND` when it is not declared); takes the free partitions. */
  static async open(queue: string, name: string, options: PartitionedConsumerOptions = {}): Promise<PartitionedConsumer> {
    const { driver } = resolveConsumerOptions(options);
    const partitions = await PartitionedConsumerBase.declared(driver, queue, name, options.partitions);
    const consumer = new PartitionedConsumer(queue, name, partitions, options, await PartitionedConsumerBase.unborn(driver, queue, partitions, options.start));
    return PartitionedConsumerBase.started(consumer).catch((error: unknown) => {
      consumer.#inboxReads.stop();
      throw error;
    });
  }

  override async close(): Promise<void> {
    this.#inboxReads.stop();
    await super.close();
  }

  /** The cursor that commits everything handed out so far: `p<k>:<cursor>` per partition served ("" before the first message). */
  get cursor(): string {
    const entries: [number, string][] = [];
    for (const index of this.#served) {
      const slot = this.fan.set.get(index);
      if (slot) entries.push([index, slot.item.cursor]);
    }
    return formatPartitionedCursor(entries);
  }

  /** The next messages of the partitions held, round-robin, without waiting ([] when none). */
  read(options: ReadOptions = {}): Promise<PartitionedMessage[]> {
    return this.poll({ ...options, timeoutMs: 0 });
  }

  /**
   * The next messages, waiting up to `timeoutMs` (no limit when not given) for the first, or
   * until `signal` aborts; `maxBytes` bounds the whole answer, over every partition.
   */
  async poll(options: PollOptions = {}): Promise<PartitionedMessage[]> {
    this.assertOpen();
    const { max = 100, maxBytes = 1024 * 1024, timeoutMs, signal } = options;
    checkInteger("max", max, 1, 1_000_000);
    checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, 2 ** 31 - 1);
    const messages = await this.fan.poll(max, maxBytes, timeoutMs, signal, { raw: options.raw ?? false });
    for (const message of messages) this.#served.add(message.partition);
    return messages;
  }

  /**
   * Saves positions: after everything handed out (no argument), after a message (its
   * partition), or a composite cursor (each partition it names). A partition held elsewhere
   * (handed over since, or the cursor came from another instance) takes it through its inbox:
   * stored now, applied by its holder within about `INBOX_CHECK_MS` (consumers/ordered/commit-inbox.ts,
   * consumers/state/inbox-pace.ts).
   */
  async commit(upTo?: PartitionedMessage | string): Promise<void> {
    this.assertOpen();
    if (upTo === undefined) {
      await Promise.all([...this.#served].map((index) => this.#commitOne(index, undefined)));
      return;
    }
    if (typeof upTo !== "string") {
      if (!Number.isInteger(upTo?.partition))
        throw new VQueueError("E_CURSOR", "A message to commit must carry its partition, as this consumer handed it out.");
      await this.#commitOne(upTo.partition, upTo);
      return;
    }
    const cursors = parsePartitionedCursor(upTo, this.partitions);
    await Promise.all([...cursors].map(([index, cursor]) => this.#commitOne(index, cursor)));
  }

  /** Hands out again, in each partition held, everything after its saved position (e.g. after a failed batch). */
  async rewind(): Promise<void> {
    this.assertOpen();
    await Promise.all(this.#partitionsHeld().map((consumer) => consumer.rewind()));
  }

  /**
   * Moves every partition (to `"earliest"`, `"latest"` or a time), or each partition a composite
   * cursor names (to its cursor), and saves it there, backwards too. Every target is checked
   * first (`E_CURSOR`: nothing taken, nothing moved); then each partition is taken by this
   * instance: one held elsewhere is asked for by a request granted whatever the holder's share,
   * and its holder lets go once what it handed out is committed (`E_LOCKED` after
   * `handoffTimeoutMs`: nothing moved). Resolves with the composite cursor of the positions
   * saved (a partition never written to is left out). The partitions are shared out again as
   * the instances poll (this one holds more than its share: it hands the surplus over when asked).
   */
  async seek(to: PartitionedSeekTarget): Promise<string> {
    this.assertOpen();
    const everywhere = to === "earliest" || to === "latest" || (typeof to === "object" && to !== null && "time" in to);
    if (!everywhere && typeof to !== "string") {
      throw new VQueueError(
        "E_CURSOR",
        `Cannot seek partitioned queue "${this.queue}" to ${JSON.stringify(to)}: use "earliest", "latest", { time }, or a cursor "p<partition>:<part>.<position>.<count>,...".`,
      );
    }
    const targets: [number, SeekTarget][] = everywhere
      ? Array.from({ length: this.partitions }, (_, index) => [index, to])
      : [...parsePartitionedCursor(to, this.partitions)];
    const { driver, onProblem } = this.#resolved;
    const positions = new Map<number, ConsumerPosition>();
    await Promise.all(
      targets.map(async ([index, target]) => {
        const partition = partitionName(this.queue, index);
        // A partition never written to has nothing to move (its consumer starts at its first message).
        if (everywhere && (await listParts(driver, partition)).length === 0) return;
        positions.set(index, await resolveSeek(driver, partition, target, onProblem));
      }),
    );
    // Every partition is taken before any moves: a holder that does not let go leaves all of them where they were.
    const deadline = Date.now() + this.handoff.handoffTimeoutMs;
    const taken = await Promise.allSettled([...positions.keys()].map((index) => this.fan.set.take(index, this.handoff.handoffTimeoutMs, { force: true })));
    const refused = taken.find((result) => result.status === "rejected");
    if (refused) throw refused.reason;
    const moved = await Promise.allSettled(
      [...positions].map(async ([index, position]): Promise<[number, string]> => [index, formatCursor(await this.#seekHeld(index, position, deadline))]),
    );
    const failed = moved.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    return formatPartitionedCursor(moved.map((result) => (result as PromiseFulfilledResult<[number, string]>).value));
  }

  /**
   * Messages of the partitions held as an async iterator that waits for new ones, until `signal`
   * aborts or the loop breaks; commits as it goes (each partition's last message done) unless
   * `autoCommit: false` (see `IterateOptions`).
   */
  messages(options: IterateOptions = {}): AsyncGenerator<PartitionedMessage, void, undefined> {
    return iterateMessages(this, options);
  }

  /** Messages retention deleted before this consumer read them, over the partitions held, since the last call (see `QueueConsumer.takeMissed`). */
  takeMissed(): number {
    return this.#partitionsHeld().reduce((sum, consumer) => sum + consumer.takeMissed(), 0);
  }

  /** Every partition's consumer held, those being let go included. */
  #partitionsHeld(): QueueConsumer[] {
    return Array.from({ length: this.partitions }, (_, index) => this.fan.set.get(index)?.item).filter((consumer) => consumer !== undefined);
  }

  /** Moves partition `index`, taken here already; taken again if it was let go meanwhile (asked for by another instance), until `deadline`. */
  async #seekHeld(index: number, position: ConsumerPosition, deadline: number): Promise<ConsumerPosition> {
    for (;;) {
      const slot = this.fan.set.get(index);
      // `use` marks the slot at once: from here on a release waits for the move.
      if (slot && !slot.releasing) return this.fan.set.use(slot, (consumer) => consumer.seekTo(position));
      await this.fan.set.take(index, Math.max(10, deadline - Date.now()), { force: true });
    }
  }

  /** Commits in partition `index`: up to `upTo`, or (undefined) everything handed out here. */
  async #commitOne(index: number, upTo: Message | string | undefined): Promise<void> {
    const slot = this.fan.set.get(index);
    if (slot) {
      const handedOut = slot.item.cursor;
      try {
        return await slot.item.commit(upTo);
      } catch (error) {
        // Its lock was lost (a pause past the lease): the partition's new holder takes it, below.
        if (!isLockLost(error)) throw error;
        this.fan.set.drop(slot);
        upTo ??= handedOut;
      }
    }
    // Not held here: nothing was handed out here to commit.
    if (upTo === undefined) return;
    const last = this.#released.get(index);
    const target = typeof upTo === "string" ? parseCursor(upTo) : positionAfter(upTo);
    // At or before what was committed when the partition was let go: done already.
    if (last && comparePositions(target, last) <= 0) return;
    // Held elsewhere, or by nobody now: stored in its inbox, applied by its (next) holder.
    const partition = partitionName(this.queue, index);
    await assertCommitFits(this.#resolved.driver, partition, target);
    const [verdict] = await this.#inbox.post(partition, this.name, [{ kind: "commit", position: target }]);
    outcome(verdict!);
  }

  /** Applies the commits other instances took for the partitions held here; resolves with the inbox files read. */
  async #checkInboxes(): Promise<number> {
    let files = 0;
    // Those being let go too: a commit that reaches one ends the wait for it (the hand-over's grace).
    for (const consumer of this.closed ? [] : this.#partitionsHeld()) files += await applyInboxCommits(consumer).catch(() => 0);
    return files;
  }
}

/** Opens ordered consumer `name` of partitioned queue `queue`. See `PartitionedConsumer`. */
export function openPartitionedConsumer(queue: string, name: string, options?: PartitionedConsumerOptions): Promise<PartitionedConsumer> {
  return PartitionedConsumer.open(queue, name, options);
}
