// Over 300 lines: the one owner of the server's open writers (writer-pool.ts, partitioned-writers.ts) and consumer
// slots (ordered and shared, of ordinary and partitioned queues: one map, so the cap and idling of
// consumer-capacity.ts, EMFILE relief, the kind check and the admin calls that close them treat all
// alike); the slots themselves are consumer-slot.ts, shared-slot.ts and partitioned-slots.ts (an ordinary
// queue's consumer is taken and handed over between instances by handover-slot.ts, reached elsewhere by elsewhere-slot.ts).
import { QueueConsumer } from "../src/consumers/ordered/consumer";
import { deleteConsumer, deleteQueue, type DeleteQueueResult } from "../src/admin/delete";
import type { QueueDriver } from "../src/core/driver";
import { VQueueError } from "../src/core/errors";
import { purgeQueue, type PurgeResult } from "../src/admin/purge";
import { SharedConsumer, type SharedStats } from "../src/consumers/shared/consumer";
import { InboxPoster, outcome } from "../src/consumers/state/ack-inbox";
import { applyInboxCommits, assertCommitFits } from "../src/consumers/ordered/commit-inbox";
import { comparePositions, parseCursor } from "../src/format/position";
import { instanceId } from "../src/instances/instance-id";
import { SHARED_DEFAULTS } from "../src/options/shared";
import { consumerLockPath } from "../src/storage/paths";
import { ConsumerSlot } from "./consumer-slot";
import { ElsewhereSharedSlot } from "./elsewhere-slot";
import { takeHandoverSlot } from "./handover-slot";
import { instrumentDriver } from "./metrics/driver";
import type { ServerMetrics } from "./metrics/server-metrics";
import { SharedSlot } from "./shared-slot";
import { PartitionedConsumer } from "../src/consumers/ordered/partitioned";
import { PartitionedSharedConsumer } from "../src/consumers/shared/partitioned";
import { PartitionedConsumerSlot, PartitionedSharedSlot } from "./partitioned-slots";
import type { HeldConsumer } from "./types";
import { ApiError, busyError, isTooManyFiles } from "./errors";
import type { ResolvedQueueAppOptions } from "./options";
import { PartitionDeclarations } from "./partition-declarations";
import { PartitionedWriters } from "./partitioned-writers";
import { ConsumerCapacity, leastUsedIdle } from "./consumer-capacity";
import { WriterPool } from "./writer-pool";
import { ServerSchedules } from "./schedules";

type Slot = ConsumerSlot | SharedSlot | PartitionedConsumerSlot | PartitionedSharedSlot;

/** A consumer in the registry, ordered or shared: opening, then open (`slot` set). */
interface SlotEntry {
  kind: "ordered" | "shared";
  promise: Promise<Slot>;
  slot?: Slot;
  /** Resolves once its opening found the consumer held by another instance and asks for it (handover-slot.ts). */
  asking: Promise<void>;
  ask: () => void;
}

/**
 * The queues an app has open: one writer per queue (opened on first produce) and one reader
 * per consumer name (opened on first consume, or first lease for a shared one), as the
 * engine's locks allow. Closed by `close()`.
 */
/** How many times one request opens a consumer slot that stops by itself before it gives up. */
const MAX_REOPENS = 5;

export class QueueRegistry {
  readonly options: ResolvedQueueAppOptions;
  /** Which queues are partitioned (declared in storage, or by the `queues` option at start). */
  readonly partitions: PartitionDeclarations;
  /** The writers of partitioned queues (produce routes there when `partitions.count(queue)` says so). */
  readonly partitionedWriters: PartitionedWriters;
  /** The writers of ordinary queues. */
  readonly writers: WriterPool;
  /** Schedules, and the writers of their queues kept held (schedules.ts). */
  readonly schedules: ServerSchedules;
  #driver: Promise<QueueDriver> | undefined;
  /** Commits, acks, nacks and extends of ordinary queues' consumers held by other instances, to their inboxes. */
  #inbox: InboxPoster | undefined;
  #consumers = new Map<string, SlotEntry>();
  #closingSlots = new Map<string, Promise<void>>();
  /** A purge or delete of the queue in progress: its writer and consumers open only after it. */
  #admin = new Map<string, Promise<unknown>>();
  readonly #capacity: ConsumerCapacity;
  #sweep: ReturnType<typeof setInterval> | undefined;
  #inflight = 0;
  #drained: (() => void) | undefined;
  #closing: Promise<void> | undefined;
  /** Made at the first look (workerd refuses an AbortController made at global scope, where the app may be made). */
  #closeStarted: AbortController | undefined;

  readonly #metrics: ServerMetrics | undefined;

  constructor(options: ResolvedQueueAppOptions, metrics?: ServerMetrics) {
    this.options = options;
    this.#metrics = metrics;
    this.partitions = new PartitionDeclarations(() => this.driver(), options.declaredPartitions, options.durability !== "none");
    this.partitionedWriters = new PartitionedWriters(options, () => this.driver(), metrics);
    this.#capacity = new ConsumerCapacity(options.maxConsumers, options.consumerIdleMs);
    this.writers = new WriterPool({
      options,
      metrics,
      driver: () => this.driver(),
      adminDone: (queue) => this.#adminDone(queue),
      relieve: () => void this.#relieve(),
      isClosing: () => this.#closing !== undefined,
    });
    this.schedules = new ServerSchedules({
      writers: this.writers,
      partitionedWriters: this.partitionedWriters,
      driver: () => this.driver(),
      partitions: (queue) => this.partitions.count(queue),
      onError: (error) => this.options.logger.error("[v-queue] [schedules]", error),
    });
  }

  /**
   * Starts the idle sweep with the first consumer opened, not at construction: a host may make
   * the app at global scope, where workerd refuses timers ("Disallowed operation called within
   * global scope"), and a registry without consumers has nothing to sweep.
   */
  #startSweep(): void {
    if (this.#sweep || this.options.consumerIdleMs <= 0 || this.#closing) return;
    // Often enough for the shorter idle time near the cap; a pass only walks the map.
    this.#sweep = setInterval(() => this.#closeIdle(), Math.min(this.options.consumerIdleMs, 1000));
    (this.#sweep as { unref?: () => void }).unref?.();
  }

  /** The storage: the driver of the options (the adapters make it from a `dir` or a storage spec), measured when metrics are on. */
  driver(): Promise<QueueDriver> {
    this.#driver ??= Promise.resolve(this.#metrics ? instrumentDriver(this.options.driver, this.#metrics) : this.options.driver);
    return this.#driver;
  }

  /** Aborted once `close()` starts: what streams until the client goes (the outcome events) ends then. */
  get closing(): AbortSignal {
    this.#closeStarted ??= new AbortController();
    if (this.#closing) this.#closeStarted.abort();
    return this.#closeStarted.signal;
  }

  /** Counts a request in, so that `close()` waits for it. Returns its `done`. */
  enter(): () => void {
    if (this.#closing) throw new ApiError(503, "E_SHUTDOWN", "The server is shutting down.");
    this.#inflight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#inflight === 0) this.#drained?.();
    };
  }

  /** The consumer's slot, opened (and the consumer created) on first use; taken from another instance that holds it by request (handover-slot.ts). */
  consumer(queue: string, name: string, create = true): Promise<ConsumerSlot> {
    return this.#slot(queue, name, "ordered", (driver, entry) =>
      takeHandoverSlot({
        driver,
        queue,
        name,
        kind: "consumer",
        onAsking: entry.ask,
        open: () => QueueConsumer.open(queue, name, { ...this.#consumerOptions(driver), create }),
        busy: (consumer) => comparePositions(consumer.position, consumer.committed) > 0,
        inbox: (consumer) => applyInboxCommits(consumer),
        slot: (consumer, onStopped) => new ConsumerSlot(consumer, () => void this.#relieve(), onStopped),
      }),
    ) as Promise<ConsumerSlot>;
  }

  /**
   * Commits ordered consumer `name` of ordinary queue `queue` up to `cursor` (everything handed
   * out here without one). Held here: at once. Held by another instance (it handed the batch out,
   * and waits for this commit before it lets go): through the consumer's inbox, answered with its
   * holder's verdict (commit-inbox.ts; `E_PENDING` when none comes in time). Resolves with the cursor committed.
   */
  async commit(queue: string, name: string, cursor: string | undefined): Promise<string> {
    const entry = this.#consumers.get(`${queue}\u0000${name}`);
    const driver = await this.driver();
    // Being opened here (its lock is this server's own), not asked of another holder: committed here once open.
    if (cursor !== undefined && (await this.#openingHere(entry, "ordered"))) return (await this.consumer(queue, name, false)).commit(cursor);
    // Held here (or open here as a shared one: E_KIND), or by nobody: committed here.
    const here = entry?.kind === "shared" || (entry?.slot instanceof ConsumerSlot && !entry.slot.stopped);
    if (cursor === undefined || here || (await isFree(driver, consumerLockPath(queue, name)))) return (await this.consumer(queue, name, false)).commit(cursor);
    const position = parseCursor(cursor);
    await assertCommitFits(driver, queue, position);
    const [verdict] = await this.#poster(driver).post(queue, name, [{ kind: "commit", position }]);
    outcome(verdict!);
    return cursor;
  }

  /**
   * The shared consumer's slot: held here (taken on first use, from another instance by request:
   * handover-slot.ts), or, while another instance holds it, one whose acks, nacks and extends go
   * to its inbox and whose leases take it here (elsewhere-slot.ts).
   */
  async shared(queue: string, name: string): Promise<SharedSlot | ElsewhereSharedSlot> {
    const driver = await this.driver();
    // Held here (or open here as an ordered one: E_KIND), or by nobody: taken here. Being asked for here (a lease waits for it) is not held.
    const entry = this.#consumers.get(`${queue}\u0000${name}`);
    // Being opened here: its lock is this server's own (held elsewhere to `isFree`), unless the
    // opening found another holder and asks it (then a lease here waits for what this ack settles).
    if (await this.#openingHere(entry, "shared")) return this.#shared(queue, name);
    const here = entry?.kind === "ordered" || (entry?.slot instanceof SharedSlot && !entry.slot.stopped);
    if (here || (await isFree(driver, consumerLockPath(queue, name)))) return this.#shared(queue, name);
    return new ElsewhereSharedSlot(queue, name, this.#poster(driver), this.options.sharedFor(queue).leaseMs ?? SHARED_DEFAULTS.leaseMs, () =>
      this.#shared(queue, name),
    );
  }

  #shared(queue: string, name: string): Promise<SharedSlot> {
    return this.#slot(queue, name, "shared", (driver, entry) =>
      takeHandoverSlot({
        driver,
        queue,
        name,
        kind: "shared consumer",
        onAsking: entry.ask,
        open: () => SharedConsumer.open(queue, name, { ...this.#consumerOptions(driver), ...this.options.sharedFor(queue) }),
        // Leases running: let go once they are acknowledged (or run out); what is nacked or ready is in its state for the next holder.
        busy: (consumer) => consumer.stats.inFlight > 0,
        onReleasing: (consumer) => consumer.hurryInbox(),
        slot: (consumer, onStopped) => new SharedSlot(consumer, () => void this.#relieve(), onStopped),
      }),
    ) as Promise<SharedSlot>;
  }

  /** Whether `entry` is a consumer of `kind` being opened here that opens (true), rather than one that asks another instance for it or fails. */
  async #openingHere(entry: SlotEntry | undefined, kind: SlotEntry["kind"]): Promise<boolean> {
    if (entry?.kind !== kind || entry.slot) return false;
    return Promise.race([
      entry.promise.then(
        () => true,
        () => false,
      ),
      entry.asking.then(() => false),
    ]);
  }

  /** The poster of this server's items into other instances' consumers' inboxes. */
  #poster(driver: QueueDriver): InboxPoster {
    this.#inbox ??= new InboxPoster(driver, instanceId(), this.options.syncCommits);
    return this.#inbox;
  }

  /** The slot of ordered consumer `name` of partitioned queue `queue`: the partitions this server can hold (hand-over with other instances). */
  partitionedConsumer(queue: string, name: string): Promise<PartitionedConsumerSlot> {
    return this.#slot(queue, name, "ordered", (driver) =>
      PartitionedConsumer.open(queue, name, this.#consumerOptions(driver)).then(
        (consumer) => new PartitionedConsumerSlot(consumer, () => void this.#relieve()),
      ),
    ) as Promise<PartitionedConsumerSlot>;
  }

  /** The slot of shared consumer `name` of partitioned queue `queue`. */
  partitionedShared(queue: string, name: string): Promise<PartitionedSharedSlot> {
    return this.#slot(queue, name, "shared", (driver) =>
      PartitionedSharedConsumer.open(queue, name, { ...this.#consumerOptions(driver), ...this.options.sharedFor(queue) }).then(
        (consumer) => new PartitionedSharedSlot(consumer, () => void this.#relieve()),
      ),
    ) as Promise<PartitionedSharedSlot>;
  }

  #consumerOptions(driver: QueueDriver) {
    const { start, syncCommits, zstd, onProblem } = this.options;
    return { driver, start, syncCommits, zstd, onProblem };
  }

  /** Live stats of the shared consumers of `queue` this server holds open, by name. */
  sharedStats(queue: string): Map<string, SharedStats> {
    const out = new Map<string, SharedStats>();
    for (const [key, entry] of this.#consumers) {
      const shared = key.startsWith(`${queue}\u0000`) && !entry.slot?.stopped ? entry.slot?.held()?.shared : undefined;
      if (shared) out.set(entry.slot!.consumer.name, shared);
    }
    return out;
  }

  /** Every consumer this server holds open, by queue then name: when it was last handed out, and a shared one's live stats. */
  heldConsumers(): Map<string, Map<string, HeldConsumer>> {
    const out = new Map<string, Map<string, HeldConsumer>>();
    for (const [key, entry] of this.#consumers) {
      const held = entry.slot && !entry.slot.stopped ? entry.slot.held() : undefined;
      if (!held) continue;
      const queue = key.slice(0, key.indexOf("\u0000"));
      let names = out.get(queue);
      if (!names) out.set(queue, (names = new Map()));
      names.set(entry.slot!.consumer.name, held);
    }
    return out;
  }

  async #slot(queue: string, name: string, kind: SlotEntry["kind"], open: (driver: QueueDriver, entry: SlotEntry) => Promise<Slot>): Promise<Slot> {
    void this.writers.wakeDelayed(queue);
    for (let turn = 0; ; turn++) {
      // A slot that is stopped again at once each time (its lock lost over and over): told, not retried without end.
      if (turn === MAX_REOPENS)
        throw new ApiError(409, "E_LOCKED", `Consumer "${name}" of "${queue}" lost its lock again each time it was opened: try again shortly.`);
      const slot = await this.#consumerSlot(queue, name, kind, open);
      // Its lease is stale (this process was paused): asked first, so that a lock lost meanwhile
      // stops the slot (`stopWhenLockLost`) and is taken anew below, instead of failing this request.
      if (!slot.stopped && !this.#closing && "holds" in slot) await slot.holds();
      // Closed as idle just now: open it again (unless the whole app is closing).
      if (!slot.stopped || this.#closing) {
        slot.lastUsed = Date.now(); // in use from now: not closed to make room (consumer-capacity.ts: HANDOUT_GRACE_MS)
        return slot;
      }
      // Stopped by itself (a partitioned consumer letting its partitions go, a lost lock) and still in the map: the
      // next turn would find it again, forever. Forgotten as a close is, so the next turn opens anew.
      const key = `${queue}\u0000${name}`;
      const entry = this.#consumers.get(key);
      if (entry?.slot === slot) void this.#closeSlot(key, entry);
    }
  }

  #consumerSlot(queue: string, name: string, kind: SlotEntry["kind"], open: (driver: QueueDriver, entry: SlotEntry) => Promise<Slot>): Promise<Slot> {
    // Closing: the slots were stopped; a new one would keep a long poll (and the close) waiting.
    if (this.#closing) return Promise.reject(new ApiError(503, "E_SHUTDOWN", "The server is shutting down."));
    const key = `${queue}\u0000${name}`;
    const existing = this.#consumers.get(key);
    // Open here as the other kind: the engine would say E_LOCKED (its own lock); the truth is E_KIND.
    if (existing && existing.kind !== kind) return Promise.reject(kindError(queue, name, existing.kind));
    if (existing) return existing.promise;
    const pendingClose = this.#closingSlots.get(key);
    const admin = this.#adminDone(queue);
    this.#startSweep();
    const entry = { kind } as SlotEntry;
    entry.asking = new Promise<void>((resolve) => (entry.ask = resolve));
    entry.promise = (async () => {
      await pendingClose;
      await admin;
      await this.#makeRoom();
      const driver = await this.driver();
      return (entry.slot = await this.#relieved(() => open(driver, entry)));
    })();
    this.#consumers.set(key, entry);
    entry.promise.catch(() => this.#consumers.get(key) === entry && this.#consumers.delete(key));
    return entry.promise;
  }

  /**
   * Deletes a consumer: ends the waits of this server's reader of it (404 for them), closes
   * it, then the engine removes it (refused, 409, while another process has it open). A
   * consume arriving meanwhile opens it again afterwards, as a new consumer.
   */
  async deleteConsumer(queue: string, name: string): Promise<void> {
    const key = `${queue}\u0000${name}`;
    const entry = this.#consumers.get(key);
    this.#consumers.delete(key);
    const pending = this.#closingSlots.get(key);
    const deleted = (async () => {
      await Promise.all([pending, entry && this.#stopEntry(entry, "deleted")]);
      await deleteConsumer(await this.driver(), queue, name);
    })();
    this.#closingSlots.set(key, deleted);
    try {
      await deleted;
    } finally {
      if (this.#closingSlots.get(key) === deleted) this.#closingSlots.delete(key);
    }
  }

  /** Deletes a queue (see `#administer`): waits on its consumers here end with 404. */
  deleteQueue(queue: string): Promise<DeleteQueueResult> {
    return this.#administer(queue, "deleted", async (driver) => {
      const deleted = await deleteQueue(driver, queue);
      this.partitions.forget(queue);
      return deleted;
    });
  }

  /** Purges a queue (see `#administer`): waits on its consumers here end empty. */
  purgeQueue(queue: string): Promise<PurgeResult> {
    return this.#administer(queue, "closed", (driver) => purgeQueue(driver, queue, { durability: this.options.durability, onProblem: this.options.onProblem }));
  }

  /**
   * Runs a purge or delete of `queue`. This server's own writer and consumers of it are the
   * server's, not another process's: they are closed first (pushes already handed to the
   * writer are written, so they land before; parked polls end with `reason`), and new ones wait
   * until it is done. A writer or consumer open in another process makes the engine refuse (409).
   */
  #administer<T>(queue: string, reason: "closed" | "deleted", run: (driver: QueueDriver) => Promise<T>): Promise<T> {
    const previous = this.#adminDone(queue);
    // Taken now, before anything waits: a writer or consumer asked for from here on waits for this.
    // A partitioned queue's writer too (its partitions' locks): the engine deletes or purges each partition.
    const closing: Promise<unknown>[] = [this.writers.closeForAdmin(queue), this.partitionedWriters.closeQueue(queue)];
    for (const [key, entry] of this.#consumers) {
      if (!key.startsWith(`${queue}\u0000`)) continue;
      this.#consumers.delete(key);
      closing.push(this.#stopEntry(entry, reason));
    }
    for (const [key, closed] of this.#closingSlots) if (key.startsWith(`${queue}\u0000`)) closing.push(closed);
    const op = (async () => {
      await previous;
      await Promise.all(closing);
      return run(await this.driver());
    })();
    this.#admin.set(queue, op);
    const clear = () => void (this.#admin.get(queue) === op && this.#admin.delete(queue));
    op.then(clear, clear);
    const after = () => this.writers.afterAdmin(queue);
    op.then(after, after);
    return op;
  }

  /** Resolves once no purge or delete of `queue` started before now is running (whatever its outcome). */
  #adminDone(queue: string): Promise<void> {
    const noop = () => {};
    return (this.#admin.get(queue) ?? Promise.resolve()).then(noop, noop);
  }

  /** Stops a slot (once open) that was taken out of the map; a failed open or close is nothing to stop. */
  async #stopEntry(entry: SlotEntry, reason: "closed" | "deleted"): Promise<void> {
    const slot = await entry.promise.catch(() => undefined);
    await slot?.stop(reason).catch((error: unknown) => this.options.logger.error("[v-queue] [http] closing a consumer:", error));
  }

  /** Ends every wait, lets requests in flight finish (their writes included), then closes every file. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closeStarted?.abort();
      if (this.#sweep) clearInterval(this.#sweep);
      await this.schedules.close();
      const entries = [...this.#consumers.values()];
      this.#consumers.clear();
      const stopping = entries.map((e) =>
        e.promise.then(
          (slot) => slot.stop("closed"),
          () => {},
        ),
      );
      if (this.#inflight > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
      await Promise.all([...stopping, ...this.#closingSlots.values()]);
      await Promise.all([this.writers.close(), this.partitionedWriters.close()]);
      await (await this.#driver?.catch(() => undefined))?.dispose?.();
    })();
    return this.#closing;
  }

  #closeIdle(): void {
    const limit = this.#capacity.idleLimit(this.#consumers.size);
    const now = Date.now();
    for (const [key, entry] of this.#consumers) {
      if (entry.slot?.idle && now - entry.slot.lastUsed >= limit) void this.#closeSlot(key, entry);
    }
  }

  /** Before opening one more consumer (counted in already): at the cap, closes the least recently used idle ones, or refuses (503). */
  async #makeRoom(): Promise<void> {
    const cap = this.#capacity.cap();
    const excess = this.#consumers.size - cap;
    if (excess <= 0) return;
    const closing = this.#closeLeastUsed(excess);
    if (closing.length < excess) throw busyError(`${cap} consumers are open and in use, the most this server keeps open at once: retry later.`);
    await Promise.all(closing);
  }

  /**
   * Out of file descriptors (EMFILE): lowers the cap below the consumers open now, for a
   * while, and closes idle ones (least recently used first) down to it.
   */
  async #relieve(): Promise<void> {
    const open = this.#consumers.size;
    const { cap, started } = this.#capacity.pressure(open);
    if (started) {
      this.options.logger.warn(
        `[v-queue] [http] Too many open files with ${open} consumers open: closing idle ones, keeping at most ${cap} open for a minute. Raise the fd limit (ulimit -n) or lower \`maxConsumers\`.`,
      );
    }
    await Promise.all(this.#closeLeastUsed(open - cap));
  }

  /** Runs `open`; on EMFILE, makes room (`#relieve`) and tries once more. */
  async #relieved<T>(open: () => Promise<T>): Promise<T> {
    try {
      return await open();
    } catch (error) {
      if (!isTooManyFiles(error) || this.#closing) throw error;
      await this.#relieve();
      return open();
    }
  }

  /** Closes up to `count` idle slots, least recently used first (none handed out just now). */
  #closeLeastUsed(count: number): Promise<void>[] {
    return leastUsedIdle(this.#consumers, count).map(([key, entry]) => this.#closeSlot(key, entry as SlotEntry));
  }

  /** Closes an idle slot; never rejects (a failed close is logged). */
  #closeSlot(key: string, entry: SlotEntry): Promise<void> {
    this.#consumers.delete(key);
    const closed: Promise<void> = entry
      .slot!.stop("closed")
      .catch((error: unknown) => this.options.logger.error("[v-queue] [http] closing an idle consumer:", error))
      .finally(() => this.#closingSlots.get(key) === closed && this.#closingSlots.delete(key));
    this.#closingSlots.set(key, closed);
    return closed;
  }
}

/** Whether nobody holds the lock at `path` now (taken and let go at once: a look, not a hold). */
async function isFree(driver: QueueDriver, path: string): Promise<boolean> {
  const lock = await driver.lock(path);
  await lock?.release();
  return lock !== undefined;
}

function kindError(queue: string, name: string, kind: SlotEntry["kind"]): VQueueError {
  return kind === "shared"
    ? new VQueueError(
        "E_KIND",
        `Consumer "${name}" of queue "${queue}" is a shared consumer: use lease, ack, nack and extend, or another name for an ordered one.`,
      )
    : new VQueueError(
        "E_KIND",
        `Consumer "${name}" of queue "${queue}" is an ordered consumer (one cursor): consume and commit, or use another name for a shared one.`,
      );
}
