// Over 300 lines: a partitioned queue's writers and an ordinary queue's (a set of one) share the
// partition set, the take-and-retry path of a write and the routing; split, each would need all of it.
/**
 * The writer side of a partitioned queue (partitions/declaration.ts), shared by many instances: each
 * partition has one writer at a time, and this instance opens the partitions' writers as it
 * needs them (docs/partitioned.md). A message with a key goes to its key's partition
 * (its order kept); one without goes to the partitions in turn, of those held here or free.
 * An ordinary queue is served the same way as a set of one partition, the queue itself
 * (`PartitionedWriter.ordinary`): its writer is handed over between instances on request.
 */
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { WANT_FRESH_MS, resolveHandoffOptions, type HandoffOptions, type ResolvedHandoffOptions, type Want } from "../instances/handoff";
import { Members } from "../instances/members";
import { assertName } from "../core/names";
import type { EncodedInput, MessageInput } from "../format/message";
import { resolveQueueOptions, type QueueOptions, type ResolvedQueueOptions } from "../options/queue";
import { PartitionSet, type Slot } from "../partitions/set";
import { openPartitions, partitionName, partitionOfKey, readPartitions } from "../partitions/declaration";
import { writerMembersPath, writerWantPath } from "../storage/paths";
import type { ProduceOptions, ProduceResult } from "./produce";
import { readSchedules, type Schedule, type ScheduleInput } from "./schedules";
import { QueueWriter } from "./writer";

export interface PartitionedQueueOptions extends QueueOptions, HandoffOptions {
  /** Declares the queue with this many partitions if it is not declared yet; a declared queue must have as many. */
  partitions?: number;
  /**
   * Called once for each partition's writer whose lock is lost to another holder (this instance
   * was paused or cut off past its lease), found by a renewal, a check before a write or a write
   * the storage's fence refused: nothing is acknowledged with it after, the produces go on with
   * the partition taken again or another one.
   */
  onLockLost?: (partition: number) => void;
}

export interface PartitionedProduceOptions extends ProduceOptions {
  /** Routes the batch to `crc32(partitionKey) mod partitions`: one key, one partition, its order kept. 1 to 1024 bytes. */
  partitionKey?: string | Uint8Array;
}

export type PartitionedProduceResult = ProduceResult & { partition: number };

const MAX_PARTITION_KEY = 1024;
/** How long a batch without a key passes over a partition found held by another instance (one lock attempt per partition per this, at most). */
const ELSEWHERE_MS = 1000;
const TRIES_PER_BATCH = 2;
/** How often, at most, an instance producing batches without a key says so and counts the others (instances/members.ts). */
const MEMBERS_EVERY_MS = 500;

export class PartitionedWriter {
  readonly name: string;
  readonly partitions: number;
  /** An ordinary queue (its one "partition" is the queue itself), not a partitioned one. */
  readonly ordinary: boolean;
  readonly options: ResolvedQueueOptions;
  readonly handoff: ResolvedHandoffOptions;
  readonly #set: PartitionSet<QueueWriter>;
  readonly #onLockLost: ((partition: number) => void) | undefined;
  /** The next partition in turn for a batch without a key (from a random start: instances started together do not all begin at 0). */
  #next: number;
  /** Partitions found held by another instance: passed over until then (ms). */
  readonly #elsewhere = new Map<number, number>();
  /** The instances producing batches without a key: each holds about its share of the partitions. */
  readonly #members: Members;
  #membersAt = 0;
  /** When a batch with a key last went to each partition: those are not given up for another instance's share. */
  readonly #keyedAt = new Map<number, number>();
  /** The refresh of the members record under way, if any (awaited at close, before this instance's line is taken out). */
  #refreshing: Promise<unknown> | undefined;
  /** Partitions asked of their holders for this instance's share, with when (a request lives `WANT_FRESH_MS`). */
  readonly #asked = new Map<number, number>();
  #closing: Promise<void> | undefined;
  /** Partitions handed over to another instance (on request) since open. */
  handedOver = 0;

  private constructor(name: string, partitions: number, options: PartitionedQueueOptions, ordinary = false) {
    this.name = name;
    this.partitions = partitions;
    this.ordinary = ordinary;
    this.#next = Math.floor(Math.random() * partitions);
    this.handoff = resolveHandoffOptions(options);
    const { partitions: _, handoffTimeoutMs: _t, minHoldMs: _m, idleMs: _i, onLockLost, ...queueOptions } = options;
    this.#onLockLost = onLockLost;
    this.options = resolveQueueOptions(queueOptions);
    const resolved = this.options;
    // An ordinary queue's writer opens as it always did the first time (a new part, the crate's
    // habit); taken again after a hand-over, it appends to the current part (a part per hand-over else).
    let opened = 0;
    this.#set = new PartitionSet<QueueWriter>({
      driver: resolved.driver,
      queue: name,
      count: partitions,
      ...(ordinary ? { partition: () => name } : {}),
      wantPath: writerWantPath,
      what: (partition) => `The writer of queue "${partition}"`,
      open: async (index) => {
        if (ordinary) {
          // A queue declared partitioned is refused by the writer itself (E_OPTION).
          return this.#counted(index, QueueWriter.open(name, { ...queueOptions, ...(opened++ > 0 ? { rollOnOpen: false } : {}) }));
        }
        // Deleted since open (deleteQueue): not made again as an ordinary queue under a partition's name.
        if ((await readPartitions(resolved.driver, name)) !== partitions)
          throw new VQueueError("E_NOT_FOUND", `Queue "${name}" is no longer declared with ${partitions} partitions (it was deleted): open it again.`);
        // A partition's writer changes hands often: a new part at each hand-over (the crate 0.2.x's
        // habit) would leave a part per hand-over. Appending to the current part is what 0.3.x does.
        // Partition 0's writer keeps the queue's schedules: each firing goes to its key's partition.
        const route = index === 0 ? (key: string, data: EncodedInput) => this.#routeFiring(key, data) : undefined;
        return this.#counted(index, QueueWriter.open(partitionName(name, index), { rollOnOpen: false, ...queueOptions, create: true }, route));
      },
      // Its produces in flight are waited for (PartitionSet.use): nothing else to wait for.
      busy: () => false,
      // Its delayed messages are moved and its schedules fired by whoever holds the writer: not let go for idleness.
      keep: (writer) => writer.delayedPending > 0 || writer.scheduleCount > 0,
      close: (writer) => writer.close(),
      grant: (want, held, index) => this.#grant(want, held, index),
      minHoldMs: this.handoff.minHoldMs,
      idleMs: this.handoff.idleMs,
      // A produce in flight ends (written or failed) on its own.
      graceMs: Number.MAX_SAFE_INTEGER,
      onRelease: (_slot, reason) => {
        if (reason === "wanted") this.handedOver++;
      },
    });
    this.#members = new Members(resolved.driver, writerMembersPath(partitionName(name, 0)), this.#set.id);
  }

  /**
   * Opens partitioned queue `queue` for writing: `E_NOT_FOUND` when it is not declared (and
   * `partitions` does not declare it). Takes no partition yet: each is taken at its first produce.
   */
  static async open(queue: string, options: PartitionedQueueOptions = {}): Promise<PartitionedWriter> {
    const driver = resolveQueueOptions(options).driver;
    const partitions = await openPartitions(driver, queue, options.partitions, { sync: options.durability !== "none" });
    const writer = new PartitionedWriter(queue, partitions, options);
    // Schedules fire only while partition 0's writer is open somewhere: taken here when free (as opening a QueueWriter fires them).
    if ((await readSchedules(driver, partitionName(queue, 0)).catch(() => [])).length > 0) await writer.holdIfFree().catch(() => {});
    return writer;
  }

  /**
   * Opens ordinary queue `queue` for writing from one of many instances: its writer is taken at
   * the first write, and handed over to another instance that asks for it (after the write in
   * flight); a write here asks for it back. `E_LOCKED` (after `handoffTimeoutMs`) only from a
   * holder that does not hand over (the crate, a process that does not read the requests).
   */
  static ordinary(queue: string, options: PartitionedQueueOptions = {}): PartitionedWriter {
    assertName(queue, "queue");
    return new PartitionedWriter(queue, 1, options, true);
  }

  /**
   * Runs `write` on an ordinary queue's writer, taken by request when another instance holds it:
   * resolves with what `write` resolves with. A writer let go or lost meanwhile is taken again.
   */
  async write<T>(write: (writer: QueueWriter) => Promise<T>): Promise<T> {
    if (!this.ordinary) throw new VQueueError("E_KIND", `Queue "${this.name}" is partitioned: produce to it (a partition is chosen per batch).`);
    return this.#writeTo(0, write);
  }

  /**
   * Sets schedule `name` (see `QueueWriter.schedule`), kept by the writer of partition 0 (the
   * queue's own for an ordinary queue), taken by request when another instance holds it. Each
   * firing of a partitioned queue goes to the partition of its idempotency key, deduplicated there.
   */
  schedule(name: string, schedule: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    return this.#writeTo(0, (writer) => writer.schedule(name, schedule));
  }

  /** Removes schedule `name`: false when there is none. */
  unschedule(name: string): Promise<boolean> {
    return this.#writeTo(0, (writer) => writer.unschedule(name));
  }

  /** The queue's schedules, by name, as storage has them (whichever instance holds partition 0's writer). */
  schedules(): Promise<Schedule[]> {
    return readSchedules(this.options.driver, this.ordinary ? this.name : partitionName(this.name, 0));
  }

  /** A firing of partition 0's schedules: into partition 0 itself (undefined) or through its key's partition's writer. */
  #routeFiring(key: string, data: EncodedInput): Promise<void> | undefined {
    const partition = partitionOfKey(key, this.partitions);
    return partition === 0 ? undefined : this.#writeTo(partition, (writer) => writer.fireRouted(key, data));
  }

  /**
   * An ordinary queue's writer (a partitioned queue's partition 0, keeper of its schedules) taken when free and not asked for by another instance (to move its
   * delayed messages when due, to fire its schedules); never waits for a holder. One held here
   * whose lock was lost (taken over while this process was paused) is let go first.
   */
  async holdIfFree(): Promise<void> {
    if (this.#closing) return;
    const held = this.#set.get(0);
    if (held && !held.releasing && held.using === 0 && !(await held.item.holds())) this.#set.drop(held);
    await this.#set.tryTakeUnwanted(0);
  }

  /** The partitions whose writer this instance holds now. */
  held(): number[] {
    return this.#set.held().map((slot) => slot.index);
  }

  /**
   * Produces a batch, whole, into one partition: `partitionKey`'s, else the idempotency `key`'s
   * (a retry lands where the first try did, and is deduplicated there), else the next partition
   * in turn that this instance holds or finds free, or one asked of its holder. `E_LOCKED` when a keyed
   * partition's holder does not hand it over within `handoffTimeoutMs`.
   */
  async produce(messages: Iterable<MessageInput>, options: PartitionedProduceOptions = {}): Promise<PartitionedProduceResult> {
    const { partitionKey, ...produceOptions } = options;
    // A group lives in one partition: its key picks it when no partition key does.
    const routed = this.#route(partitionKey ?? produceOptions.group, produceOptions.key);
    if (routed !== undefined) this.#keyedAt.set(routed, Date.now());
    let partition = -1;
    const result = await this.#writeTo(routed, (writer, index) => {
      partition = index;
      return writer.produce(messages, produceOptions);
    });
    return { ...result, partition };
  }

  /** Runs `write` on partition `routed`'s writer (undefined: any partition, see `#anySlot`), taken by request if needed. */
  async #writeTo<T>(routed: number | undefined, write: (writer: QueueWriter, index: number) => Promise<T>): Promise<T> {
    if (this.#closing) throw new VQueueError("E_CLOSED", `Queue "${this.name}" is closed.`);
    let slot: Slot<QueueWriter>;
    // A slot let go while it was being taken (a hand-over request) is taken again, or another one;
    // so is one whose lock lapsed and was taken meanwhile (an idle isolate in workerd: QueueWriter.holds).
    for (let lapsed = 0; ;) {
      // Held already (the common case): no storage call on the way while its lease is fresh.
      const held = routed === undefined ? undefined : this.#set.get(routed);
      slot = held && !held.releasing ? held : routed === undefined ? await this.#anySlot() : await this.#set.take(routed, this.handoff.handoffTimeoutMs);
      if (slot.releasing) continue;
      if (lapsed++ < 2 && !(await slot.item.holds())) {
        this.#set.drop(slot);
        continue;
      }
      // Let go while its lock was checked (a hand-over, an idle release), or closed by a failed write: not written to.
      if (slot.item.closed) this.#set.drop(slot);
      if (slot.releasing || slot.item.closed) continue;
      break;
    }
    this.#set.touch(slot);
    try {
      return await this.#set.use(slot, (writer) => write(writer, slot.index));
    } catch (error) {
      // A writer that lost its lock (or its storage) refuses everything from now on: the next produce opens it again.
      if (slot.item.closed || (VQueueError.isError(error) && ["E_LOCKED", "E_FENCED", "E_IO"].includes(error.code))) this.#set.drop(slot);
      throw error;
    }
  }

  /**
   * The writer of partition `index` once open, its lost lock reported (`onLockLost`) however the
   * loss is found: a renewal after a pause, a check before a write, a fenced write; or a fenced
   * write of its opening (the lock taken, then lost to another instance while this one was paused
   * before its first write: the open fails with `E_FENCED`, and no writer is there to tell).
   */
  async #counted(index: number, opening: Promise<QueueWriter>): Promise<QueueWriter> {
    let writer: QueueWriter;
    try {
      writer = await opening;
    } catch (error) {
      if (VQueueError.isError(error) && error.code === "E_FENCED") this.#onLockLost?.(index);
      throw error;
    }
    writer.whenLockLost(() => this.#onLockLost?.(index));
    return writer;
  }

  /** Waits for the produces in flight, closes every partition's writer and releases their locks. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const slot of this.#set.held()) while (slot.using > 0) await new Promise((resolve) => setTimeout(resolve, 5));
      await this.#refreshing;
      await this.#members.leave();
      await this.#set.close();
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #route(partitionKey: unknown, key: string | undefined): number | undefined {
    if (this.ordinary) return 0;
    if (partitionKey !== undefined) {
      const length = typeof partitionKey === "string" ? partitionKey.length : partitionKey instanceof Uint8Array ? partitionKey.length : -1;
      if (length < 1 || length > MAX_PARTITION_KEY) {
        throw new VQueueError(
          "E_OPTION",
          `Invalid partitionKey ${typeof partitionKey === "string" ? JSON.stringify(partitionKey.slice(0, 40)) : typeof partitionKey}: use a string or bytes of 1 to ${MAX_PARTITION_KEY} characters.`,
        );
      }
      return partitionOfKey(partitionKey as string | Uint8Array, this.partitions);
    }
    // Checked by the partition's writer (writer/produce.ts) before anything is written.
    return typeof key === "string" && key.length > 0 ? partitionOfKey(key, this.partitions) : undefined;
  }

  /**
   * A partition for a batch without a key: the next one in turn over all partitions, held or
   * free; those held by other instances are passed over (tried again `ELSEWHERE_MS` later);
   * none held here and none free, one asked for. Round-robin over what is held alone left every
   * partition an instance did not take at its first produces unwritten (one instance producing
   * one batch at a time wrote every batch to one partition, so one consumer instance read them all).
   */
  async #anySlot(): Promise<Slot<QueueWriter>> {
    const holding = this.#set.held();
    const now = Date.now();
    // A free partition is taken only while every one held is in use: an instance producing a batch
    // now and then keeps the few it uses open, instead of opening a writer per batch (each closed
    // again `idleMs` later, unused).
    const grow = holding.every((slot) => now - slot.usedAt < this.handoff.idleMs / 2);
    let failed: unknown;
    if (now - this.#membersAt >= MEMBERS_EVERY_MS && !this.#closing && !this.#refreshing) {
      this.#membersAt = now;
      // One at a time (a slow storage must not have two writes of the record cross), awaited at close.
      this.#refreshing = this.#members.refresh().finally(() => (this.#refreshing = undefined));
    }
    for (let i = 0, tries = 0; i < this.partitions; i++) {
      const index = this.#next;
      const following = (index + 1) % this.partitions;
      const held = this.#set.get(index);
      if (held) {
        this.#next = following;
        // Being let go (idle, or asked for): not waited for nor taken back.
        if (!held.releasing) return held;
        continue;
      }
      // Holding none, every partition is tried (one let go lately too): there is nothing else to write to.
      if (holding.length > 0 && (!grow || (this.#elsewhere.get(index) ?? 0) > now)) {
        this.#next = following;
        continue;
      }
      // Holding some, a batch makes at most TRIES_PER_BATCH lock attempts: it does not wait on a
      // sweep of every partition held elsewhere (64 of them, each a few round trips, once a second).
      if (holding.length > 0 && tries >= TRIES_PER_BATCH) break;
      this.#next = following;
      tries++;
      const slot = await this.#set.tryTakeUnwanted(index).catch((error: unknown) => {
        // A partition that cannot be opened now (storage, recovery) is passed over as one held
        // elsewhere, and the batch goes to another; said, and thrown only if no other will do.
        if (VQueueError.isError(error) && error.code === "E_NOT_FOUND") throw error;
        failed ??= error;
        this.options.onProblem({
          code: "PARTITION_SKIPPED",
          queue: partitionName(this.name, index),
          message: `Partition ${index} of queue "${this.name}" could not be opened for a batch without a key (${(error as Error).message}); the batch goes to another partition, and this one is tried again later.`,
        });
        return undefined;
      });
      if (slot) {
        this.#elsewhere.delete(index);
        return slot;
      }
      // Not all looked at again at the same moment (each a lock attempt): spread over half a period.
      this.#elsewhere.set(index, Date.now() + ELSEWHERE_MS * (1 + Math.random() / 2));
      if (failed === undefined) this.#askForShare(index);
    }
    const held = this.#set.held();
    if (held.length > 0) return held[Math.floor(Math.random() * held.length)]!;
    if (failed !== undefined) throw failed;
    return this.#set.take(Math.floor(Math.random() * this.partitions), this.handoff.handoffTimeoutMs);
  }

  /**
   * Below its share of the partitions (among the instances producing batches without a key),
   * this instance asks the holder of `index` for it, without waiting: the holder lets go if it
   * holds more than its share (`#grant`), and a later batch takes it. Else an instance that came
   * when every partition was held wrote all its batches into the one it asked for.
   */
  #askForShare(index: number): void {
    const now = Date.now();
    for (const [asked, at] of this.#asked) if (now - at >= WANT_FRESH_MS || this.#set.get(asked)) this.#asked.delete(asked);
    // Not counting what it asked already: a holder at its own share says no without saying so,
    // and the asker would wait out that request. The holders' shares bound what is granted.
    if (this.#asked.has(index) || this.#set.held().length >= this.#members.share(this.partitions).floor) return;
    this.#asked.set(index, now);
    void this.#set.want(index, { members: this.#members.count });
  }

  /**
   * Whether to hand partition `index`'s writer over: always to a produce that needs it (a key's
   * partition: its request counts no members). For another instance's share, only above this
   * one's, and never one that batches with a key went to within `idleMs` (it would be asked back
   * at once: the partition would pass back and forth), nor by an instance that produces no
   * batches without a key (it counts no share; what it does not use goes after `idleMs`).
   */
  #grant(want: Want, held: number, index: number): boolean {
    if (want.members === undefined || want.force) return true;
    if (!this.#members.active || Date.now() - (this.#keyedAt.get(index) ?? 0) < this.handoff.idleMs) return false;
    this.#members.saw(want.by);
    return held > this.#members.share(this.partitions, Math.max(this.#members.count, want.members)).floor;
  }
}

/** The schedules of `queue` as storage has them: a partitioned queue's are its partition 0's. */
export async function readQueueSchedules(driver: QueueDriver, queue: string): Promise<Schedule[]> {
  return readSchedules(driver, (await readPartitions(driver, queue)) === undefined ? queue : partitionName(queue, 0));
}

/** Opens partitioned queue `queue` for writing. See `PartitionedWriter`. */
export function openPartitionedQueue(queue: string, options?: PartitionedQueueOptions): Promise<PartitionedWriter> {
  return PartitionedWriter.open(queue, options);
}
