/**
 * A shared consumer of a partitioned queue, shared by many instances (docs/partitioned.md):
 * shared consumer `name` of each partition (consumers/shared/consumer.ts), held by one instance
 * at a time; this instance leases from the partitions it holds, round-robin. A lease carries its
 * partition, and `ack`/`nack`/`extend` go to that partition's consumer (an ack of a partition
 * held elsewhere goes through its inbox, consumers/state/ack-inbox.ts). A partition is handed
 * over once its leases are acknowledged or ran out (or after `handoffGraceMs`): the new holder
 * delivers the unacknowledged ones again (at least once).
 */
import { InboxPoster, outcome, verdictError } from "../state/ack-inbox";
import { VQueueError } from "../../core/errors";
import { isLockLost } from "../../storage/fence";
import { resolveHandoffOptions, type ConsumerHandoffOptions, type ResolvedHandoffOptions } from "../../instances/handoff";
import { checkInteger, resolveConsumerOptions } from "../../options/queue";
import { PartitionedConsumerBase } from "../../partitions/consumer-base";
import { PartitionFan } from "../../partitions/fan";
import {
  MAX_ERROR_CHARS,
  SharedConsumer,
  type AckAllOptions,
  type AckOptions,
  type LeasedMessage,
  type LeaseRef,
  type NackOptions,
  type SharedPollOptions,
} from "./consumer";
import { outcomeValueJson } from "../../format/outcome";
import { MAX_LEASE_MS, resolveSharedOptions, type RateLimit, type ResolvedSharedOptions, type SharedConsumerOptions } from "../../options/shared";
import type { LeasingConsumer, LeasingStats, SharedIterateOptions } from "../types";
import { iterateShared } from "./iterate";
import { partitionName } from "../../partitions/declaration";

export interface PartitionedSharedOptions extends SharedConsumerOptions, ConsumerHandoffOptions {
  /** Declares the queue with this many partitions if it is not declared yet; a declared queue must have as many. */
  partitions?: number;
}

/** A lease of a partitioned queue's message: in partition `partition`. */
export type PartitionedLeasedMessage = LeasedMessage & { partition: number };
export type PartitionedLeaseRef = LeaseRef & { partition: number };

export class PartitionedSharedConsumer
  extends PartitionedConsumerBase<SharedConsumer, LeasedMessage, { leaseMs?: number }>
  implements LeasingConsumer<PartitionedLeasedMessage, PartitionedLeaseRef>
{
  readonly handoff: ResolvedHandoffOptions;
  readonly #shared: ResolvedSharedOptions;
  /** Acks, nacks and extends of partitions held elsewhere, to their inboxes. */
  readonly #inbox: InboxPoster;

  private constructor(queue: string, name: string, partitions: number, options: PartitionedSharedOptions, unborn: Set<string>) {
    const handoff = resolveHandoffOptions(options);
    const { handoffTimeoutMs: _t, minHoldMs: _m, idleMs: _i, handoffGraceMs: _g, partitions: _p, ...sharedOptions } = options;
    // Checked now, not at the first partition's open.
    const shared = resolveSharedOptions(partitionName(queue, 0), sharedOptions);
    const limits = splitLimit(queue, partitions, shared.limiter);
    const fan = new PartitionFan<SharedConsumer, LeasedMessage, { leaseMs?: number }>({
      driver: shared.driver,
      queue,
      name,
      partitions,
      kind: "shared consumer",
      handoff,
      open: (partition) =>
        SharedConsumer.open(partition, name, {
          ...sharedOptions,
          ...(unborn.has(partition) && { start: "earliest" }),
          ...(limits && { limiter: limits.get(partition) }),
        }),
      busy: (shared) => shared.stats.inFlight > 0,
      // Asked for: its leases are most often acked through the asker, into its inbox.
      onReleasing: (shared) => shared.hurryInbox(),
      close: (shared) => shared.close(),
      whenLockLost: (shared, listener) => shared.whenLockLost(listener),
      take: (shared, max, maxBytes, { leaseMs }) => shared.poll({ leaseMs, max, maxBytes, timeoutMs: 0 }),
      size: (message) => message.size,
      priority: (shared) => shared.topPriority,
      committed: (shared) => shared.floor,
    });
    super(queue, name, partitions, fan);
    this.handoff = handoff;
    this.#shared = shared;
    this.#inbox = new InboxPoster(shared.driver, fan.set.id, shared.syncCommits);
  }

  /** Opens shared consumer `name` of partitioned queue `queue` (`E_NOT_FOUND` when it is not declared); takes the free partitions. */
  static async open(queue: string, name: string, options: PartitionedSharedOptions = {}): Promise<PartitionedSharedConsumer> {
    const { driver } = resolveConsumerOptions(options);
    const partitions = await PartitionedConsumerBase.declared(driver, queue, name, options.partitions);
    return PartitionedConsumerBase.started(
      new PartitionedSharedConsumer(queue, name, partitions, options, await PartitionedConsumerBase.unborn(driver, queue, partitions, options.start)),
    );
  }

  /** Leases up to `max` messages from the partitions held, round-robin, waiting up to `timeoutMs` for the first. */
  async poll(options: SharedPollOptions = {}): Promise<PartitionedLeasedMessage[]> {
    this.assertOpen();
    const { max = 10, maxBytes = Infinity, leaseMs, signal, timeoutMs } = options;
    checkInteger("max", max, 1, 1_000_000);
    if (maxBytes !== Infinity) checkInteger("maxBytes", maxBytes, 1, 2 ** 31);
    if (leaseMs !== undefined) checkInteger("leaseMs", leaseMs, 1, MAX_LEASE_MS);
    if (timeoutMs !== undefined) checkInteger("timeoutMs", timeoutMs, 0, MAX_LEASE_MS);
    return this.fan.poll(max, maxBytes, timeoutMs, signal, { leaseMs });
  }

  /**
   * Acknowledges a lease in its partition (see `SharedConsumer.ack`). A partition this instance
   * does not hold (handed over since, or never held here) takes it through its inbox
   * (consumers/state/ack-inbox.ts): stored, and answered with its holder's verdict (`E_PENDING`
   * when no holder decides in time).
   */
  async ack(ref: PartitionedLeaseRef, options?: AckOptions): Promise<void> {
    const [error] = await this.ackAll([ref], options?.result === undefined ? undefined : { results: [options.result] });
    if (error) throw error;
  }

  /**
   * Acknowledges many leases, one journal write per partition held (see `SharedConsumer.ackAll`)
   * and one inbox file per partition held elsewhere; resolves with each one's error, or undefined when acked.
   */
  async ackAll(refs: PartitionedLeaseRef[], options?: AckAllOptions): Promise<(Error | undefined)[]> {
    this.assertOpen();
    // Checked once, here: a held partition's consumer and an inbox line take them as JSON alike.
    const given = options?.results;
    const results = given && refs.map((_, i) => outcomeValueJson("result", given[i]));
    const errors: (Error | undefined)[] = new Array(refs.length).fill(undefined);
    const held = new Map<SharedConsumer, number[]>();
    const elsewhere = new Map<number, number[]>();
    refs.forEach((ref, i) => {
      const invalid = this.#invalid(ref);
      if (invalid) return void (errors[i] = invalid);
      const slot = this.fan.set.get(ref.partition);
      if (slot) held.set(slot.item, [...(held.get(slot.item) ?? []), i]);
      else elsewhere.set(ref.partition, [...(elsewhere.get(ref.partition) ?? []), i]);
    });
    const post = async (partition: number, indexes: number[]) => {
      const posted = this.#inbox.post(
        partitionName(this.queue, partition),
        this.name,
        indexes.map((i) => ({ kind: "ack", ref: refs[i]!, result: results?.[i] })),
      );
      await posted.then(
        (verdicts) => indexes.forEach((i, k) => (errors[i] = verdictError(verdicts[k]!))),
        (error: Error) => indexes.forEach((i) => (errors[i] = error)),
      );
    };
    await Promise.all([
      ...[...held].map(async ([shared, indexes]) => {
        const settled = await shared
          .ackJson(
            indexes.map((i) => refs[i]!),
            results && indexes.map((i) => results[i]),
          )
          .catch((error: Error) => indexes.map(() => error));
        indexes.forEach((i, k) => (errors[i] = settled[k]));
        // Let go meanwhile (a hand-over closed it), or its lock lost (a pause past the lease): its next holder takes them.
        const moved = indexes.filter((i) => (VQueueError.isError(errors[i]) && (errors[i] as VQueueError).code === "E_CLOSED") || isLockLost(errors[i]));
        if (moved.length > 0) await post(refs[moved[0]!]!.partition, moved);
      }),
      ...[...elsewhere].map(([partition, indexes]) => post(partition, indexes)),
    ]);
    return errors;
  }

  /** Gives a lease back in its partition (see `SharedConsumer.nack`); one held elsewhere through its inbox (applied, and answered, if the lease still runs there). */
  async nack(ref: PartitionedLeaseRef, options: NackOptions = {}): Promise<void> {
    // One whose lock was lost (a pause past the lease) goes to the partition's new holder, below.
    const held = await this.#onHeld(ref, (shared) => shared.nack(ref, options));
    if (held) return held.value;
    const { delayMs, defaultDelayMs, error, deadLetter = false, release = false } = options;
    if (delayMs !== undefined) checkInteger("delayMs", delayMs, 0, MAX_LEASE_MS);
    if (defaultDelayMs !== undefined) checkInteger("defaultDelayMs", defaultDelayMs, 0, MAX_LEASE_MS);
    if (release && deadLetter) throw new VQueueError("E_OPTION", "Invalid nack: release and deadLetter exclude each other.");
    const [verdict] = await this.#inbox.post(partitionName(this.queue, ref.partition), this.name, [
      { kind: "nack", ref, delayMs, defaultDelayMs, release, deadLetter, error: error === undefined ? undefined : String(error).slice(0, MAX_ERROR_CHARS) },
    ]);
    outcome(verdict!);
  }

  /** Reports a lease's progress in its partition (see `SharedConsumer.progress`); one held elsewhere through its inbox. */
  async progress(ref: PartitionedLeaseRef, progress: unknown): Promise<void> {
    const held = await this.#onHeld(ref, (shared) => shared.progress(ref, progress));
    if (held) return held.value;
    const json = outcomeValueJson("progress", progress);
    if (json === undefined) throw new VQueueError("E_OPTION", "Invalid progress: undefined; give a JSON value (a number, a string, an object...).");
    const [verdict] = await this.#inbox.post(partitionName(this.queue, ref.partition), this.name, [{ kind: "progress", ref, progress: json }]);
    outcome(verdict!);
  }

  /**
   * Keeps a lease longer (see `SharedConsumer.extend`). One of a partition held elsewhere goes
   * through its inbox: the holder applies it within about `INBOX_CHECK_MS`, or before the message
   * would go out again, while the lease is not handed out again; its verdict says until when.
   */
  async extend(ref: PartitionedLeaseRef, options: { leaseMs?: number } = {}): Promise<number> {
    const held = await this.#onHeld(ref, (shared) => shared.extend(ref, options));
    if (held) return held.value;
    const { leaseMs = this.#shared.leaseMs } = options;
    checkInteger("leaseMs", leaseMs, 1, MAX_LEASE_MS);
    const until = Date.now() + leaseMs;
    const [verdict] = await this.#inbox.post(partitionName(this.queue, ref.partition), this.name, [{ kind: "extend", ref, until }]);
    return outcome(verdict!) ?? until;
  }

  /**
   * Hands nothing out for `ms`, in every partition (see `SharedConsumer.backOff`): those held
   * here at once; those held elsewhere through their inboxes (their holders apply it within about
   * `INBOX_CHECK_MS`, a partition nobody holds at its next open). Resolves with its end.
   */
  async backOff(ms: number): Promise<number> {
    this.assertOpen();
    checkInteger("ms", ms, 0, MAX_LEASE_MS);
    const until = Date.now() + ms;
    const held = new Set(this.fan.set.held().map((slot) => slot.index));
    for (let partition = 0; partition < this.partitions; partition++) {
      // Not waited for: a partition nobody holds answers only at its next open.
      if (!held.has(partition)) void this.#inbox.post(partitionName(this.queue, partition), this.name, [{ kind: "backOff", until }]).catch(() => {});
    }
    await Promise.all(this.fan.set.held().map((slot) => slot.item.backOff(ms)));
    return until;
  }

  /** Gives a lease back unworked: `nack` with `release` (its delivery is not counted, it never dead-letters). */
  release(ref: PartitionedLeaseRef): Promise<void> {
    return this.nack(ref, { release: true });
  }

  /** Leased messages of the partitions held as an async iterator: acked when the loop body is done with one, nacked when it throws or breaks. */
  messages(options: SharedIterateOptions = {}): AsyncGenerator<PartitionedLeasedMessage, void, undefined> {
    return iterateShared<PartitionedLeasedMessage>(this, options);
  }

  /** What the partitions held here hold now, summed; `oldestUnacked` is the one handed out longest ago, with its partition. */
  get stats(): LeasingStats {
    const sum: LeasingStats = {
      inFlight: 0,
      ready: 0,
      waiting: 0,
      window: 0,
      redelivered: 0,
      redeliveredPending: 0,
      deadLettered: 0,
      deadLetteredTotal: 0,
      oldestUnacked: null,
    };
    for (const slot of this.fan.set.held()) {
      const { ackFloor: _floor, oldestUnacked, limitedUntil, ...counts } = slot.item.stats;
      for (const key of Object.keys(counts) as (keyof typeof counts)[]) sum[key] += counts[key];
      if (limitedUntil !== undefined) sum.limitedUntil = Math.max(sum.limitedUntil ?? 0, limitedUntil);
      if (oldestUnacked && (sum.oldestUnacked === null || (oldestUnacked.waitedMs ?? -1) > (sum.oldestUnacked.waitedMs ?? -1)))
        sum.oldestUnacked = { partition: slot.index, ...oldestUnacked };
    }
    return sum;
  }

  /** The consumer of a lease's partition if this instance holds it; `E_LEASE` for no lease of this queue. */
  /** `call` on the consumer of `ref`'s partition held here; undefined when there is none, or its lock was lost (the caller goes through the inbox). */
  async #onHeld<T>(ref: PartitionedLeaseRef, call: (shared: SharedConsumer) => Promise<T>): Promise<{ value: T } | undefined> {
    const shared = this.#heldFor(ref);
    if (!shared) return undefined;
    try {
      return { value: await call(shared) };
    } catch (error) {
      if (!isLockLost(error)) throw error;
      return undefined;
    }
  }

  #heldFor(ref: PartitionedLeaseRef): SharedConsumer | undefined {
    this.assertOpen();
    const invalid = this.#invalid(ref);
    if (invalid) throw invalid;
    return this.fan.set.get(ref.partition)?.item;
  }

  /** Why `ref` is no lease of this queue, if it is not. */
  #invalid(ref: PartitionedLeaseRef): VQueueError | undefined {
    if (!Number.isInteger(ref?.partition) || ref.partition < 0 || ref.partition >= this.partitions) {
      return new VQueueError(
        "E_LEASE",
        `Invalid lease: its partition ${JSON.stringify(ref?.partition)} is not one of queue "${this.queue}" (0 to ${this.partitions - 1}); give the lease as poll returned it.`,
      );
    }
    if (![ref.part, ref.offset, ref.lease].every((n) => Number.isSafeInteger(n) && n >= 0)) {
      return new VQueueError(
        "E_LEASE",
        `Invalid lease: part, offset and lease must be integers from 0 (got ${JSON.stringify([ref.part, ref.offset, ref.lease])}); give the lease as poll returned it.`,
      );
    }
    return undefined;
  }
}

/**
 * Each partition's share of a rate limit (its consumer's own limit): `max` split so that the shares
 * add up to it. A partition held here counts its own hand-outs only, so a skewed queue (its
 * messages in a few partitions) stays under `max`.
 */
function splitLimit(queue: string, partitions: number, limit: RateLimit | undefined): Map<string, RateLimit> | undefined {
  if (!limit) return undefined;
  if (limit.max < partitions)
    throw new VQueueError(
      "E_OPTION",
      `Invalid limiter.max ${limit.max}: use at least ${partitions}, one per partition of queue "${queue}" (each gets its share).`,
    );
  const base = Math.floor(limit.max / partitions);
  const extra = limit.max % partitions;
  return new Map(Array.from({ length: partitions }, (_, k) => [partitionName(queue, k), { max: base + (k < extra ? 1 : 0), durationMs: limit.durationMs }]));
}

/** Opens shared consumer `name` of partitioned queue `queue`. See `PartitionedSharedConsumer`. */
export function openPartitionedSharedConsumer(queue: string, name: string, options?: PartitionedSharedOptions): Promise<PartitionedSharedConsumer> {
  return PartitionedSharedConsumer.open(queue, name, options);
}

/** @deprecated The same as `openPartitionedSharedConsumer`, named as `openSharedConsumer` is. */
export const openPartitionedShared = openPartitionedSharedConsumer;
