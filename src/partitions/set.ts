// Over 300 lines: taking, holding and letting go of a partition's lock are one state machine per
// partition; its states are in one place.
/**
 * What one instance holds of a partitioned queue: one object per partition it took (a writer,
 * a consumer), each under that partition's lock. Shared by the partitioned writer and both
 * partitioned consumers: taking a partition (free at once, or by hand-over request:
 * instances/handoff.ts), and letting go of it when another instance asks for it (after `minHoldMs`) or
 * when it was not used for `idleMs` — once its outstanding work is done (`busy` false), or
 * after `graceMs` anyway.
 */
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { sleep } from "../core/sleep";
import { instanceId } from "../instances/instance-id";
import {
  CHECK_MS,
  WATCHED_CHECK_MS,
  isWanted,
  readWant,
  takeByRequest,
  unlessLocked,
  withdrawWant,
  writeWant,
  type Want,
  type WantContext,
} from "../instances/handoff";
import { partitionName } from "./declaration";

/** Marker changes come in bursts (a temporary file, then its rename): the markers are read at most this often for them. */
const MIN_CHECK_MS = 15;

export interface Slot<T> {
  readonly index: number;
  readonly item: T;
  /** When it was taken. */
  readonly since: number;
  /** When it was last used (`touch`). */
  usedAt: number;
  /** Being let go: no new work goes to it. */
  releasing: boolean;
  /** Calls in flight on it (`use`): it is let go only after them. */
  using: number;
}

export interface PartitionSetHooks<T> {
  driver: QueueDriver;
  /** The partitioned queue. */
  queue: string;
  count: number;
  /** The queue partition `index` is: `partitionName` unless given (an ordinary queue is a set of one, the queue itself). */
  partition?(index: number): string;
  /** The want marker of partition queue `partition` (storage/paths.ts). */
  wantPath(partition: string): string;
  /** What is taken, for messages: `the writer of queue "orders.p3"`. */
  what(partition: string): string;
  /** Opens what partition `index`'s lock guards; `E_LOCKED` when another holder has it. */
  open(index: number): Promise<T>;
  /** Whether `item` has outstanding work (a produce in flight, messages not yet committed, leases). */
  busy(item: T): boolean;
  /** Whether `item` is kept however long it is not used (a writer with delayed messages to move when due). */
  keep?(item: T): boolean;
  close(item: T): Promise<void>;
  /** Calls `listener` once when `item`'s lock is found lost (a lease taken over): its slot is dropped then, whatever was using it. */
  whenLockLost?(item: T, listener: () => void): void;
  minHoldMs: number;
  idleMs: number;
  /** Most time a release waits for `busy` to turn false. */
  graceMs: number;
  /**
   * Whether to hand a partition over to `want` while this instance holds `held` (those already
   * being let go not counted) of partition `index`. Without it, every request is granted (after `minHoldMs`).
   */
  grant?(want: Want, held: number, index: number): boolean;
  /**
   * Whether a request may be granted before `minHoldMs`: this instance holds more than any fair
   * share (a consumer that took every partition before the other instances came). Stricter than
   * `grant`, which is not asked for a young slot. Without it, a slot is always kept `minHoldMs`.
   */
  grantYoung?(want: Want, held: number): boolean;
  /** After a slot was let go (its object closed): hand-overs counted, a consumer's last commit kept. */
  onRelease?(slot: Slot<T>, reason: "wanted" | "idle"): void;
  /** When a slot starts being let go (no new work goes to it from now): a server's waits on it end. */
  onReleasing?(slot: Slot<T>): void;
}

export class PartitionSet<T> {
  /** This instance, as its want markers name it. */
  readonly id = instanceId();
  readonly #hooks: PartitionSetHooks<T>;
  readonly #slots = new Map<number, Slot<T>>();
  readonly #taking = new Map<number, Promise<Slot<T> | undefined>>();
  readonly #requests = new Map<number, Promise<Slot<T>>>();
  /** Partitions asked for with `want`, not taken yet. */
  readonly #wanted = new Set<number>();
  readonly #releases = new Set<Promise<void>>();
  readonly #unwatch: () => void;
  #checkedAt = 0;
  #checking = false;
  #trailing: ReturnType<typeof setTimeout> | undefined;
  /** A check when a slot too young to hand over (`minHoldMs`) comes of age: its marker's event came before. */
  #ofAge: ReturnType<typeof setTimeout> | undefined;
  #closed = false;

  constructor(hooks: PartitionSetHooks<T>) {
    this.#hooks = hooks;
    // The markers live in the base directory: a driver that watches it wakes the check when one
    // of a held partition is written. Every other entry there (commits, info lines, other sets'
    // markers) changes all the time: passed by.
    const unwatch = hooks.driver.watch?.("", (name) => {
      if (name === undefined || this.#isMarkerOfHeld(name)) void this.#check();
    });
    // Idle slots go on this timer alone: a short idleMs keeps it short.
    const every = unwatch ? Math.max(CHECK_MS, Math.min(WATCHED_CHECK_MS, hooks.idleMs / 4)) : CHECK_MS;
    const timer = setInterval(() => void this.#check(), every);
    // Not kept alive by this: an instance left open does not hold its process.
    (timer as { unref?: () => void }).unref?.();
    this.#unwatch = () => {
      clearInterval(timer);
      clearTimeout(this.#trailing);
      clearTimeout(this.#ofAge);
      unwatch?.();
    };
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** The slots that take work now, in partition order. */
  held(): Slot<T>[] {
    return [...this.#slots.values()].filter((slot) => !slot.releasing).sort((a, b) => a.index - b.index);
  }

  /** Every slot held, those being let go included (they still take commits). */
  get(index: number): Slot<T> | undefined {
    return this.#slots.get(index);
  }

  /** Partition `index`, held already or free now; undefined when another instance holds it. Never waits for a holder. */
  tryTake(index: number): Promise<Slot<T> | undefined> {
    const held = this.#slots.get(index);
    if (held && !held.releasing) return Promise.resolve(held);
    let taking = this.#taking.get(index);
    if (!taking) {
      taking = this.#take(index).finally(() => this.#taking.delete(index));
      this.#taking.set(index, taking);
    }
    return taking;
  }

  /** As `tryTake`, but leaves a partition another instance asked for to that instance (so that one let go is not taken back at once). */
  async tryTakeUnwanted(index: number): Promise<Slot<T> | undefined> {
    const held = this.#slots.get(index);
    if (held && !held.releasing) return held;
    if (await isWanted(this.#hooks.driver, this.#markerOf(index), this.id)) return undefined;
    return this.tryTake(index);
  }

  /** Partition `index`, asking its holder to hand it over if needed (`E_LOCKED` after `timeoutMs`); `context` goes with the request. */
  take(index: number, timeoutMs: number, context?: WantContext): Promise<Slot<T>> {
    const held = this.#slots.get(index);
    if (held && !held.releasing) return Promise.resolve(held);
    // One request per partition at a time: concurrent produces for it wait for the same one.
    let request = this.#requests.get(index);
    if (!request) {
      const partition = this.#partition(index);
      const tryTake = () => {
        if (this.#closed)
          throw new VQueueError("E_CLOSED", `Queue "${this.#hooks.queue}" was closed while waiting for ${this.#hooks.what(partition).replace(/^The/, "the")}.`);
        return this.tryTake(index);
      };
      request = takeByRequest(this.#hooks.driver, this.#hooks.wantPath(partition), this.id, tryTake, timeoutMs, this.#hooks.what(partition), context).finally(
        () => this.#requests.delete(index),
      );
      this.#requests.set(index, request);
    }
    return request;
  }

  /** Asks the holder of partition `index` to let go, without waiting (a consumer tries again at its next poll). */
  want(index: number, context: WantContext): Promise<void> {
    this.#wanted.add(index);
    return writeWant(this.#hooks.driver, this.#markerOf(index), this.id, context).catch(() => {});
  }

  touch(slot: Slot<T>): void {
    slot.usedAt = Date.now();
  }

  /** Runs a call on a slot's object (a produce, a read): a release waits for it to end. */
  async use<R>(slot: Slot<T>, call: (item: T) => Promise<R>): Promise<R> {
    slot.using++;
    try {
      return await call(slot.item);
    } finally {
      slot.using--;
    }
  }

  /** Lets go of a slot whose object failed (a lost lock): at once, its close's errors dropped. */
  drop(slot: Slot<T>): void {
    if (this.#slots.get(slot.index) !== slot) return;
    this.#slots.delete(slot.index);
    void this.#hooks.close(slot.item).catch(() => {});
  }

  /** Lets go of a slot once it is not busy (or after `graceMs`). */
  release(slot: Slot<T>, reason: "wanted" | "idle"): Promise<void> {
    if (slot.releasing) return Promise.resolve();
    slot.releasing = true;
    this.#hooks.onReleasing?.(slot);
    const run = (async () => {
      const until = Date.now() + this.#hooks.graceMs;
      while (slot.using > 0) await sleep(5);
      while (this.#hooks.busy(slot.item) && Date.now() < until && !this.#closed) await sleep(10);
      if (this.#slots.get(slot.index) === slot) this.#slots.delete(slot.index);
      await this.#hooks.close(slot.item).catch(() => {});
      this.#hooks.onRelease?.(slot, reason);
    })();
    this.#releases.add(run);
    void run.finally(() => this.#releases.delete(run));
    return run;
  }

  /** Closes everything held (busy work gets no grace: its owner waited for it first). */
  async close(): Promise<void> {
    this.#closed = true;
    this.#unwatch();
    await Promise.allSettled([...this.#taking.values()]);
    const slots = [...this.#slots.values()];
    this.#slots.clear();
    const errors = (await Promise.allSettled([...slots.map((slot) => this.#hooks.close(slot.item)), ...this.#releases])).filter((r) => r.status === "rejected");
    if (errors.length > 0) throw (errors[0] as PromiseRejectedResult).reason;
  }

  async #take(index: number): Promise<Slot<T> | undefined> {
    // A slot being let go here frees its lock first.
    while (this.#slots.get(index)?.releasing) await sleep(5);
    if (this.#closed) return undefined;
    const item = await unlessLocked(() => this.#hooks.open(index));
    if (item === undefined) return undefined;
    if (this.#closed) {
      await this.#hooks.close(item);
      return undefined;
    }
    const now = Date.now();
    const slot: Slot<T> = { index, item, since: now, usedAt: now, releasing: false, using: 0 };
    this.#slots.set(index, slot);
    // Another instance holds it now: a commit, an ack or a read here must not find it held.
    this.#hooks.whenLockLost?.(item, () => this.drop(slot));
    // Asked for and got: the marker goes (left, it would keep others off this partition for a while).
    if (this.#wanted.delete(index)) void withdrawWant(this.#hooks.driver, this.#markerOf(index), this.id);
    return slot;
  }

  /** A check in `ms` (one pending at a time): when the youngest slot passed over can be handed over. */
  #checkWhenOfAge(ms: number): void {
    this.#ofAge ??= setTimeout(() => {
      this.#ofAge = undefined;
      void this.#check();
    }, ms);
  }

  /** The want marker of partition `index` (in the base directory). */
  #markerOf(index: number): string {
    return this.#hooks.wantPath(this.#partition(index));
  }

  #partition(index: number): string {
    return this.#hooks.partition?.(index) ?? partitionName(this.#hooks.queue, index);
  }

  /** Whether a base-directory entry is the marker of a held partition, or its temporary file (a name that only starts with one passes too: a check in vain). */
  #isMarkerOfHeld(name: string): boolean {
    for (const index of this.#slots.keys()) if (name.startsWith(this.#markerOf(index))) return true;
    return false;
  }

  /**
   * Every `CHECK_MS` (`WATCHED_CHECK_MS` with a watch), and when a marker changes (at most every `MIN_CHECK_MS`): one
   * marker read per slot held long enough; idle slots go.
   */
  async #check(): Promise<void> {
    const now = Date.now();
    if (this.#closed) return;
    if (this.#checking || now - this.#checkedAt < MIN_CHECK_MS) {
      // A change seen meanwhile (a marker's temporary file, then its rename) gets a check of its own, soon.
      this.#trailing ??= setTimeout(() => {
        this.#trailing = undefined;
        void this.#check();
      }, MIN_CHECK_MS);
      return;
    }
    this.#checking = true;
    this.#checkedAt = now;
    try {
      const wanted = await Promise.all(
        this.held().map(async (slot) => {
          if (now - slot.usedAt >= this.#hooks.idleMs && slot.using === 0 && !this.#hooks.busy(slot.item) && !this.#hooks.keep?.(slot.item))
            return void this.release(slot, "idle");
          const young = now - slot.since < this.#hooks.minHoldMs;
          if (young && !this.#hooks.grantYoung) return void this.#checkWhenOfAge(slot.since + this.#hooks.minHoldMs - now);
          const want = await readWant(this.#hooks.driver, this.#markerOf(slot.index), this.id);
          return want && { slot, want, young };
        }),
      );
      // One at a time, each granted against what is still held (a release marks its slot at once):
      // requests that come together do not take this instance below its share.
      for (const request of wanted) {
        if (!request) continue;
        const { slot, want, young } = request;
        // A young slot's grant is the stricter one (it implies `grant`): one of the two is asked.
        const granted = young ? this.#hooks.grantYoung!(want, this.held().length) : this.#hooks.grant?.(want, this.held().length, slot.index) !== false;
        if (granted) void this.release(slot, "wanted");
        else if (young) this.#checkWhenOfAge(slot.since + this.#hooks.minHoldMs - now);
      }
    } finally {
      this.#checking = false;
    }
  }
}
