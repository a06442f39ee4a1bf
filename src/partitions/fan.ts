// Over 300 lines: one hand-out across partitions (share, take, hand over, read round-robin) whose
// steps share the same held set; split, each part would need all of it.
/**
 * The reading side of a partitioned queue, for both kinds of consumer: one consumer name over
 * every partition, each partition's consumer of that name held by one instance at a time
 * (partitions/set.ts). The instances polling a consumer share its partitions evenly
 * (instances/members.ts): an instance takes the free partitions that have something to read up to its
 * share, asks for what it lacks while it holds less than its share (and for one partition at a
 * time while it has nothing to read), and hands one over only when it holds more than its
 * share. It reads the partitions it holds round-robin (an answer filled from one, then the next,
 * from a start that turns with each answer), so that none starves another.
 */
import type { ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { isLockLost } from "../storage/fence";
import { VQueueError } from "../core/errors";
import { sleep } from "../core/sleep";
import { RETRY_MS, type ResolvedHandoffOptions, type Want } from "../instances/handoff";
import { readPosition } from "../consumers/state/position-file";
import { PartitionSet } from "./set";
import { Members } from "../instances/members";
import { partitionName } from "./declaration";
import { consumerMembersPath, consumerWantPath } from "../storage/paths";
import { queueTotals } from "../log/totals";

/** `P`: what one poll asks of every partition's take besides its size (a lease time, raw text). */
export interface FanHooks<T, M, P> {
  driver: QueueDriver;
  queue: string;
  name: string;
  partitions: number;
  /** "consumer" or "shared consumer", for messages. */
  kind: string;
  handoff: ResolvedHandoffOptions;
  open(partition: string): Promise<T>;
  /** Handed-out messages not yet committed (acknowledged): the partition is let go only after them, or after `handoffGraceMs`. */
  busy(item: T): boolean;
  close(item: T): Promise<void>;
  /** Calls `listener` once when `item`'s lock is found lost: its partition is let go at once. */
  whenLockLost(item: T, listener: () => void): void;
  /** Up to `max` messages of one partition, their bodies up to `maxBytes` (at least one), without waiting. */
  take(item: T, max: number, maxBytes: number, poll: P): Promise<M[]>;
  /** A message's body size in bytes (what `maxBytes` counts). */
  size(message: M): number;
  /** The highest priority `item` knows to be waiting (a shared consumer's, docs/work-queues.md#priorities): its turn comes first. */
  priority?(item: T): number;
  /** Resolves when `item` may have new messages (or on timeout / abort); without it, the fan re-reads every `WAIT_STEP_MS`. */
  wait?(item: T, timeoutMs: number, signal: AbortSignal): Promise<unknown>;
  /** The saved position (ack floor) of `item`: what its lag counts from. */
  committed(item: T): ConsumerPosition;
  /** Called when a partition starts to be let go (asked for, or idle), before its busy wait. */
  onReleasing?(item: T): void;
  /** Called once a partition was let go (its object closed). */
  onRelease?(index: number, item: T): void;
}

/** How often the partitions this instance does not hold are looked at (their lag), at most. */
const ACQUIRE_MS = 200;
/** Re-read step when the consumer has no way to wait (`FanHooks.wait`). */
const WAIT_STEP_MS = 50;

export class PartitionFan<T, M, P> {
  readonly set: PartitionSet<T>;
  readonly #hooks: FanHooks<T, M, P>;
  #next = 0;
  #scannedAt = 0;
  /** Whether the last look asked for partitions (this instance had nothing to read). */
  #scanAsked = false;
  #retriedAt = 0;
  #scanning: Promise<void> | undefined;
  #retrying: Promise<void> | undefined;
  /** Partitions asked for (a hand-over): tried every `RETRY_MS` until they come. */
  readonly #asked = new Set<number>();
  /** Partitions handed over to another instance on request, since open. */
  handedOver = 0;
  readonly #members: Members;

  get kind(): string {
    return this.#hooks.kind;
  }

  constructor(hooks: FanHooks<T, M, P>) {
    this.#hooks = hooks;
    const { queue, name, handoff } = hooks;
    this.set = new PartitionSet<T>({
      driver: hooks.driver,
      queue,
      count: hooks.partitions,
      wantPath: (partition) => consumerWantPath(partition, name),
      what: (partition) => `The ${hooks.kind} "${name}" of queue "${partition}"`,
      open: (index) => hooks.open(partitionName(queue, index)),
      busy: hooks.busy,
      close: async (item) => hooks.close(item),
      whenLockLost: hooks.whenLockLost,
      minHoldMs: handoff.minHoldMs,
      idleMs: handoff.idleMs,
      graceMs: handoff.handoffGraceMs,
      grant: (want, held) => this.#grant(want, held),
      grantYoung: (want, held) => this.#grant(want, held, true),
      onReleasing: (slot) => hooks.onReleasing?.(slot.item),
      onRelease: (slot, reason) => {
        if (reason === "wanted") this.handedOver++;
        hooks.onRelease?.(slot.index, slot.item);
      },
    });
    this.#members = new Members(hooks.driver, consumerMembersPath(partitionName(queue, 0), name), this.set.id);
  }

  /**
   * Takes the free partitions that have something to read (and those never read by this name),
   * up to this instance's share; asks no holder and says nothing of this instance to the others
   * (its polls do): an instance that opens the consumer only to take an ack or a commit for
   * another one must not draw partitions away from those that poll.
   */
  start(): Promise<void> {
    return this.#acquire(false, false);
  }

  /**
   * Up to `max` messages from the partitions held, round-robin, each tagged with its partition,
   * their bodies up to `maxBytes` over all partitions (at least one message); waits up to
   * `timeoutMs` (no limit when not given) for the first. `poll` goes to every take.
   */
  async poll(max: number, maxBytes: number, timeoutMs: number | undefined, signal: AbortSignal | undefined, poll: P): Promise<(M & { partition: number })[]> {
    const deadline = timeoutMs === undefined ? undefined : Date.now() + timeoutMs;
    for (;;) {
      let got = await this.#round(max, maxBytes, poll);
      if (got.length === 0) {
        await this.#acquire(true);
        got = await this.#round(max, maxBytes, poll);
      } else void this.#acquire(false).catch(() => {});
      // Closed meanwhile: nothing more comes.
      if (got.length > 0 || signal?.aborted || this.set.closed) return got;
      const remaining = deadline === undefined ? ACQUIRE_MS : deadline - Date.now();
      if (remaining <= 0) return [];
      await this.#waitAny(Math.min(remaining, this.#acquireEvery), signal);
    }
  }

  /** The refusal of a commit or an ack of partition `index`, which this instance no longer holds. */
  notHeld(index: number, code: "E_CURSOR" | "E_LEASE"): VQueueError {
    return new VQueueError(
      code,
      `Partition ${index} of ${this.#hooks.kind} "${this.#hooks.name}" of queue "${this.#hooks.queue}" is not held by this instance (it was handed over): what it handed out and did not commit is delivered again.`,
    );
  }

  /** Messages after the saved positions (ack floors), summed over every partition. */
  async lag(): Promise<number> {
    const { driver, queue, name, partitions, committed } = this.#hooks;
    let lag = 0;
    for (let index = 0; index < partitions; index++) {
      const partition = partitionName(queue, index);
      const held = this.set.get(index);
      const position = held ? committed(held.item) : await readPosition(driver, partition, name);
      const totals = await queueTotals(driver, partition);
      if (totals) lag += position ? totals.lagAfter(position) : totals.messages;
    }
    return lag;
  }

  async close(): Promise<void> {
    await this.#members.leave();
    await this.set.close();
  }

  /**
   * A partition is handed over only when this instance holds more than its share: handing one
   * over below it would leave this instance to ask for one back, and the partitions would pass
   * back and forth. An instance that no longer polls grants every request (it does not read).
   * Above `ceil` (it took them all before the others came), a partition taken less than
   * `minHoldMs` ago goes too: keeping it makes the newcomers wait, and it cannot come back. A
   * forced request (a seek, which must hold every partition it moves) is always granted.
   */
  #grant(want: Want, held: number, young = false): boolean {
    if (want.force) return true;
    // Not polling: it does not read, so it lets go of all, but of what it took lately only after minHoldMs.
    if (!this.#members.active) return !young;
    // The asker polls, and may have counted a newcomer this instance has not read yet.
    this.#members.saw(want.by);
    const share = this.#members.share(this.#hooks.partitions, Math.max(this.#members.count, want.members ?? 0));
    return held > (young ? share.ceil : share.floor);
  }

  get #acquireEvery(): number {
    return this.#asked.size > 0 ? RETRY_MS : ACQUIRE_MS;
  }

  async #round(max: number, maxBytes: number, poll: P): Promise<(M & { partition: number })[]> {
    const held = this.set.held();
    const out: (M & { partition: number })[] = [];
    if (held.length === 0) return out;
    // Filled from one partition, then the next, from a start that turns with each call: an answer
    // from fewer partitions commits fewer positions (a split of every answer over P partitions
    // cost a commit per partition per answer), and over the calls every partition has its turn.
    const start = this.#next++ % held.length;
    let turns = held.map((_, i) => held[(start + i) % held.length]!);
    // Partitions with messages of a higher priority waiting go first (the turn stays among equals).
    const priority = this.#hooks.priority;
    if (priority) {
      const ranks = new Map(turns.map((slot) => [slot, priority(slot.item)]));
      if ([...ranks.values()].some((rank) => rank > 0)) turns = turns.sort((a, b) => ranks.get(b)! - ranks.get(a)!);
    }
    // The byte limit is the whole answer's, not each partition's (P partitions must not make it P times larger).
    let bytes = 0;
    for (let i = 0; i < turns.length && out.length < max && bytes < maxBytes; i++) {
      const slot = turns[i]!;
      if (slot.releasing) continue;
      // A take returns at least one message: the answer may pass `maxBytes` by one, as an ordinary queue's read does.
      const budget = maxBytes - bytes;
      const messages = await this.set
        .use(slot, (item) => this.#hooks.take(item, max - out.length, budget, poll))
        .catch((error: unknown) => {
          // Let go meanwhile (a hand-over): nothing more from it here.
          if (slot.releasing || this.set.get(slot.index) !== slot) return [];
          // Its lock was lost (a lease taken over): another instance has the partition now.
          if (isLockLost(error)) {
            this.set.drop(slot);
            return [];
          }
          // Others' messages are taken already (a shared consumer's are leased and counted):
          // answered, not dropped for nobody until their lease runs out. The failure shows at
          // this partition's next turn.
          if (out.length > 0) return [];
          throw error;
        });
      if (messages.length === 0) continue;
      this.set.touch(slot);
      for (const message of messages) {
        bytes += this.#hooks.size(message);
        out.push(Object.assign(message as M & object, { partition: slot.index }) as M & { partition: number });
      }
    }
    return out;
  }

  /**
   * Looks at the partitions not held, at most every `ACQUIRE_MS`: a free one with something to
   * read is taken; a held one with something to read is asked for when `ask` (this instance
   * has nothing to read from its own). Between those looks, the partitions asked for are tried
   * every `RETRY_MS` (one lock attempt each, no reads).
   */
  #acquire(ask: boolean, polling = true): Promise<void> {
    const now = Date.now();
    // The first time this instance has nothing to read, it asks at once (not `ACQUIRE_MS` after the last look, which only took free partitions).
    const scan = now - this.#scannedAt >= ACQUIRE_MS || (ask && !this.#scanAsked);
    if (scan && !this.#scanning) {
      // A look made at open (not polling) does not hold back the first poll's.
      if (polling) this.#scannedAt = now;
      this.#scanning = this.#scan(ask, polling).finally(() => (this.#scanning = undefined));
      return this.#scanning;
    }
    // A look takes a while on a busy instance: the partitions asked for are tried meanwhile.
    if (this.#asked.size > 0 && now - this.#retriedAt >= RETRY_MS && !this.#retrying) {
      this.#retriedAt = now;
      this.#retrying = this.#retryAsked().finally(() => (this.#retrying = undefined));
      return this.#retrying;
    }
    return this.#retrying ?? this.#scanning ?? Promise.resolve();
  }

  async #scan(ask: boolean, polling: boolean): Promise<void> {
    this.#scanAsked = ask;
    // Holding its share already (as last counted) and not asking: nothing to take, so the other
    // partitions' lags are not read (a few reads each, every scan, on every instance).
    const full = !ask && this.set.held().length >= this.#members.share(this.#hooks.partitions).ceil;
    const [, readable] = await Promise.all([this.#members.refresh(polling), full ? [] : this.#readable()]);
    const share = this.#members.share(this.#hooks.partitions);
    let held = this.set.held().length;
    const elsewhere: number[] = [];
    let took = false;
    // Not taken meanwhile (an asked one); up to this instance's share (the others take the rest),
    // as many at once as it lacks: each take opens a consumer, a few round trips to the storage.
    const candidates = readable.filter((index) => !this.set.get(index));
    while (candidates.length > 0 && held < share.ceil) {
      const batch = candidates.splice(0, share.ceil - held);
      const taken = await Promise.all(batch.map((index) => this.set.tryTakeUnwanted(index)));
      batch.forEach((index, i) => {
        if (!taken[i]) return void elsewhere.push(index);
        took = true;
        held++;
      });
    }
    elsewhere.push(...candidates);
    // Below its share: what it lacks, at once. With nothing to read: one partition, picked at
    // random (granted by a holder above its share, or one that no longer polls). The holders
    // decide (`#grant`).
    const wanted = polling ? Math.min(elsewhere.length, Math.max(share.floor - held, ask && !took ? 1 : 0)) : 0;
    const picked = pickRandom(elsewhere, wanted);
    await Promise.all(picked.map((index) => this.set.want(index, { members: this.#members.count })));
    // Asked anew, or no longer (this instance has work of its own).
    this.#asked.clear();
    for (const index of picked) this.#asked.add(index);
  }

  /** The partitions not held here that have something to read for this consumer, or were never read by it; read at once. */
  async #readable(): Promise<number[]> {
    const { driver, queue, name, partitions } = this.#hooks;
    const found = await Promise.all(
      Array.from({ length: partitions }, async (_, index) => {
        if (this.set.get(index)) return undefined;
        const partition = partitionName(queue, index);
        const totals = await queueTotals(driver, partition);
        if (!totals) return undefined; // not written yet: nothing to read
        const position = await readPosition(driver, partition, name);
        return position && totals.lagAfter(position) === 0 ? undefined : index;
      }),
    );
    return found.filter((index) => index !== undefined);
  }

  async #retryAsked(): Promise<void> {
    for (const index of this.#asked) if (this.set.get(index) || (await this.set.tryTake(index))) this.#asked.delete(index);
  }

  /** Until a held partition may have new messages, `timeoutMs` passes or `signal` aborts. */
  async #waitAny(timeoutMs: number, signal: AbortSignal | undefined): Promise<void> {
    const held = this.set.held();
    const wait = this.#hooks.wait;
    if (!wait || held.length === 0) {
      await sleep(Math.min(timeoutMs, WAIT_STEP_MS));
      return;
    }
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await Promise.race(held.map((slot) => wait(slot.item, timeoutMs, stop.signal).catch(() => {})));
    } finally {
      stop.abort();
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** Up to `count` of `items`, picked at random, each once. */
function pickRandom<T>(items: T[], count: number): T[] {
  const pool = [...items];
  const out: T[] = [];
  while (out.length < count && pool.length > 0) out.push(pool.splice(Math.floor(Math.random() * pool.length), 1)[0]!);
  return out;
}
