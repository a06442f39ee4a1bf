// Over 300 lines: one sampling loop (when to sample, in what order, within what budget) and the
// per-queue track it keeps (rates, totals, history); the folding of partitions is partitioned-
// samples.ts.
import { comparePositions, type ConsumerPosition } from "../src/format/position";
import { sharedFileStats, type SharedFileStats } from "../src/inspect/shared";
import type { QueueOverview } from "../src/inspect/types";
import { forEachLimited, listStorage, queueOverview, type ListedQueue } from "../src/inspect/overview";
import type { HistoryJSON } from "../protocol/api";
import { HistoryRing } from "./history";
import { parsePartitionName } from "../src/partitions/declaration";
import { foldPartitions, sampledTracks, sumHistories } from "./partitioned-samples";
import type { ResolvedQueueAppOptions } from "./options";
import type { QueueRegistry } from "./registry";
import type { HeldConsumer } from "./types";
import type { ConsumerSample, MonitorSnapshot, QueueSample, SharedSample } from "./types";

/**
 * What the dashboard, `/metrics` and `stat --watch` show: every queue of the storage sampled
 * in the background (src/inspect/overview.ts: no part file read), rates and counters from the change
 * between samples, and a short history per queue and consumer. Readers get the last sample
 * from memory, so a scrape or a page of 1,000 queues costs no I/O.
 *
 * Sampling runs while someone looks (`snapshot()`), and stops after `idleMs` without a look.
 * The first look waits for the first sample at most `firstAnswerMs`: then it gets the queues read
 * so far and the names of the others (`pending`), and the sample goes on.
 * Counters (`producedTotal`, ...) count what the samples saw change since the first sample of
 * each queue (the first look of all, or, for a queue that appears later, its first message)
 * (Prometheus counters may reset with the process); they are exact across any gap between
 * samples while the parts in between still exist.
 */

/** Rates in the table: the mean of this many samples (the charts show each). */
const RATE_POINTS = 5;
/** A shared consumer another process holds: its files are read at most this often. */
const SHARED_FILES_MS = 10_000;
/**
 * A sample reads queues for at most this share of `sampleMs` (the first one reads them all):
 * with many queues each sample refreshes those used here, then the ones refreshed longest ago,
 * so a thousand queues cost a bounded time per second and each is at most a few seconds old.
 */
const BUDGET = 0.1;
const MIN_BUDGET_MS = 20;
/** Samples kept per consumer (its rate and lag over the last minute): 10,000 consumers stay under 10 MB. */
const CONSUMER_POINTS = 60;
/** How many samples ahead of its turn a queue used here is read. */
const USED_AHEAD = 5;
/** Queues read at once: round trips overlap. */
const CONCURRENCY = 16;
/**
 * A sample lets the event loop run after this long (ms): the fs driver reads small files
 * synchronously, and the first sample of 1,000 queues would hold every request for a second.
 */
const SLICE_MS = 10;

interface ConsumerTrack {
  position: ConsumerPosition;
  consumedTotal: number;
  consumedBytesTotal: number;
  lastMoved: number | null;
  redelivered: number;
  /** The held consumer's own `redelivered` at the last sample (it restarts when it is opened again). */
  liveRedelivered: number;
  files?: { at: number; stats: SharedFileStats };
  history: HistoryRing<"rate" | "lag">;
}

interface QueueTrack {
  /** Its last sample, and when it was taken. */
  sample: QueueSample | undefined;
  sampledAt: number;
  end: ConsumerPosition;
  producedTotal: number;
  producedBytesTotal: number;
  consumers: Map<string, ConsumerTrack>;
  history: HistoryRing<"produce" | "consume" | "lag">;
}

export class Monitor {
  readonly startedAt = Date.now();
  readonly #registry: QueueRegistry;
  readonly #options: ResolvedQueueAppOptions["monitor"];
  readonly #include: ((queue: string) => boolean) | undefined;
  #tracks = new Map<string, QueueTrack>();
  #last: MonitorSnapshot | undefined;
  #first: Promise<MonitorSnapshot> | undefined;
  /** While a sample runs: its listing, then the queues of it not read yet. */
  #listing: Promise<unknown> | undefined;
  #pending: Set<string> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** How long the last sample took (ms). */
  #took = 0;
  #lookedAt = 0;
  #closed = false;

  /** `include`: only these queues are sampled (`stat --watch <queue>`); by default every one. */
  constructor(registry: QueueRegistry, options: ResolvedQueueAppOptions["monitor"], include?: (queue: string) => boolean) {
    this.#registry = registry;
    this.#options = options;
    this.#include = include;
  }

  /** The last sample; starts sampling when idle and, the first time (or when the last is stale), waits for a sample. */
  snapshot(): Promise<MonitorSnapshot> {
    this.#lookedAt = Date.now();
    if (this.#closed) return Promise.resolve(this.#last ?? { at: Date.now(), sampleMs: this.#options.sampleMs, startedAt: this.startedAt, queues: [] });
    // Older than two periods: the timer is lost (workerd drops the timers a request set when it
    // ends; the dashboard showed the first sample for good) or the process was stalled.
    const stale = this.#last !== undefined && Date.now() - this.#last.at > 2 * Math.max(this.#options.sampleMs, this.#took);
    if (stale && this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (!this.#timer && !this.#first) this.#first = this.#run();
    if (!this.#last) return this.#firstAnswer(this.#first!);
    if (!stale) return Promise.resolve(this.#last);
    // Waited for, but at most a period: a sample stuck on the storage must not hold up /metrics.
    const last = this.#last;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const cap = new Promise<MonitorSnapshot>((done) => (timer = setTimeout(() => done(last), this.#options.sampleMs)));
    return Promise.race([this.#first!, cap]).finally(() => clearTimeout(timer));
  }

  /** The last complete sample: as `snapshot()`, but waits for the whole first sample. */
  async complete(): Promise<MonitorSnapshot> {
    const snapshot = await this.snapshot();
    return snapshot.pending === undefined ? snapshot : (this.#first ?? this.snapshot());
  }

  /** The first sample if it ends within `firstAnswerMs` (counted from its listing's end at the earliest), else what it has read so far. */
  async #firstAnswer(first: Promise<MonitorSnapshot>): Promise<MonitorSnapshot> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = new Promise<undefined>((done) => (timer = setTimeout(() => done(undefined), this.#options.firstAnswerMs)));
    try {
      const done = await Promise.race([first, waited]);
      if (done) return done;
    } finally {
      clearTimeout(timer);
    }
    // Before the listing ends nothing is known, not even which queues there are.
    await Promise.race([first, this.#listing]);
    const pending = this.#pending;
    if (this.#last || !pending) return first;
    return this.#partial(pending);
  }

  /** The queues the running first sample has read, and the names of the others (see `MonitorSnapshot.pending`). */
  async #partial(pending: Set<string>): Promise<MonitorSnapshot> {
    const count = (queue: string) => this.#registry.partitions.count(queue);
    const read = [...this.#tracks.keys()].filter((name) => !pending.has(name)).sort();
    const folded = await foldPartitions(
      read.flatMap((name) => this.#tracks.get(name)?.sample ?? []),
      count,
    );
    // A partitioned queue is named once; its row would sum the partitions read so far, so it waits for all of them.
    const waiting = new Set<string>();
    for (const name of pending) {
      const parsed = parsePartitionName(name);
      const partitions = parsed && (await count(parsed.queue).catch(() => undefined));
      waiting.add(partitions !== undefined && parsed!.index < partitions ? parsed!.queue : name);
    }
    const queues = folded.filter((q) => !waiting.has(q.partitionOf?.queue ?? q.name));
    return { at: Date.now(), sampleMs: this.#options.sampleMs, startedAt: this.startedAt, queues, pending: [...waiting].sort() };
  }

  /** A sample taken from now (one running now when it started after the last change is not enough: a new one). */
  async next(): Promise<MonitorSnapshot> {
    this.#lookedAt = Date.now();
    if (this.#first) await this.#first.catch(() => {});
    if (this.#closed) return this.snapshot();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#first ??= this.#run();
    return this.#first;
  }

  /** A queue's last `points` samples of produce and consume rate and worst lag. */
  history(queue: string, points: number): HistoryJSON | undefined {
    const sample = this.#last?.queues.find((q) => q.name === queue);
    const [own, ...more] = sample ? sampledTracks(sample) : [queue];
    const read = (name: string) => this.#tracks.get(name)?.history.read(points);
    return more.length === 0 ? read(own!) : sumHistories([own!, ...more].map(read));
  }

  /** A consumer's last `points` samples of rate and lag (`consume` is its rate). */
  consumerHistory(queue: string, consumer: string, points: number): HistoryJSON | undefined {
    const ring = this.#tracks.get(queue)?.consumers.get(consumer)?.history.read(points);
    return ring && { t: ring.t, consume: ring.rate, lag: ring.lag };
  }

  /** Forgets what it knows of `queue` (deleted here): made again, it is counted anew from empty. */
  forget(queue: string): void {
    const track = this.#tracks.get(queue);
    if (track) track.end = { part: -1, position: 0, count: 0 };
    track?.consumers.clear();
  }

  close(): void {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Takes a sample, schedules the next one while someone looks. */
  async #run(): Promise<MonitorSnapshot> {
    const started = Date.now();
    try {
      // Set before any await: a look that comes now waits for this listing.
      const listing = this.#registry.driver().then((driver) => listStorage(driver, this.#include));
      this.#listing = listing.catch(() => {});
      this.#last = await this.#sample(await listing);
    } catch (error) {
      this.#registry.options.logger.error("[v-queue] [monitor] sampling failed:", error);
      this.#last ??= { at: started, sampleMs: this.#options.sampleMs, startedAt: this.startedAt, queues: [] };
    } finally {
      this.#first = undefined;
      this.#listing = undefined;
      this.#pending = undefined;
      const took = (this.#took = Date.now() - started);
      if (!this.#closed && Date.now() - this.#lookedAt < this.#options.idleMs) {
        this.#timer = setTimeout(
          () => {
            this.#timer = undefined;
            this.#first = this.#run();
          },
          Math.max(this.#options.sampleMs - took, took, 0),
        );
        (this.#timer as { unref?: () => void }).unref?.();
      }
    }
    return this.#last;
  }

  async #sample(listed: Map<string, ListedQueue>): Promise<MonitorSnapshot> {
    const driver = await this.#registry.driver();
    const held = this.#registry.heldConsumers();
    const writing = this.#registry.writers.queues();
    for (const name of this.#tracks.keys()) if (!listed.has(name)) this.#tracks.delete(name);
    // Stalest first; a queue used here counts as USED_AHEAD samples staler (it changes; its reads are cheap), so others still get their turn.
    const due = (name: string) => (this.#tracks.get(name)?.sampledAt ?? 0) - (writing.has(name) || held.has(name) ? USED_AHEAD * this.#options.sampleMs : 0);
    const order = [...listed.keys()].sort((a, b) => due(a) - due(b));
    const pending = (this.#pending = new Set(order));
    // From after the listing, which a loaded machine makes slow: the budget is for the queues' reads.
    const deadline = Date.now() + Math.max(MIN_BUDGET_MS, this.#options.sampleMs * BUDGET);
    const pause = pauses(SLICE_MS);
    await forEachLimited(order.length, CONCURRENCY, async (i) => {
      const name = order[i]!;
      await pause();
      // Past the budget, a queue shown before keeps its last sample until its turn comes; the
      // stalest are read whatever the time (a sample that read none would show nothing new, ever).
      if (i >= CONCURRENCY && Date.now() > deadline && this.#tracks.get(name)?.sample) {
        pending.delete(name);
        return;
      }
      const here = held.get(name);
      const queue = await queueOverview(driver, name, listed.get(name)!, here && ((_queue, consumer) => here.get(consumer)?.position));
      if (queue) await this.#sampleQueue(queue, held.get(name), Date.now());
      pending.delete(name);
    });
    const sampled = [...listed.keys()].sort().flatMap((name) => this.#tracks.get(name)?.sample ?? []);
    const queues = await foldPartitions(sampled, (queue) => this.#registry.partitions.count(queue));
    return { at: Date.now(), sampleMs: this.#options.sampleMs, startedAt: this.startedAt, queues };
  }

  /** Samples one queue (read just now) against its last sample: rates over the time between the two. */
  async #sampleQueue(queue: QueueOverview, held: Map<string, HeldConsumer> | undefined, at: number): Promise<void> {
    const { totals } = queue;
    const end = { part: totals.currentPart, position: totals.currentEdge, count: totals.currentCount };
    let track = this.#tracks.get(queue.name);
    if (!track) {
      // Seen by the first sample: counted from here on (what was there before the server looked is
      // not "produced since"). Made after it: everything in it was produced since the last sample.
      const made = this.#last !== undefined;
      track = {
        sample: undefined,
        sampledAt: made ? this.#last!.at : at,
        end: made ? { part: -1, position: 0, count: 0 } : end,
        producedTotal: 0,
        producedBytesTotal: 0,
        consumers: new Map(),
        history: new HistoryRing(this.#options.historyPoints, ["produce", "consume", "lag"]),
      };
      this.#tracks.set(queue.name, track);
    }
    const elapsed = Math.max(0.001, (at - track.sampledAt) / 1000);
    track.sampledAt = at;
    // A current part below the last one: the queue was deleted and made again, everything is new.
    // Or on the same part with fewer records (deleted and made again within a sample, or while nobody looked).
    const renewed = end.part < track.end.part || (end.part === track.end.part && end.count < track.end.count);
    const produced = renewed ? totals.messages : totals.lagAfter(track.end);
    track.producedTotal += produced;
    track.producedBytesTotal += renewed ? totals.bytes : totals.bytesAfter(track.end);
    track.end = end;

    const consumers: ConsumerSample[] = [];
    let consumed = 0;
    let consumedTotal = 0;
    let maxLag = 0;
    let maxLagConsumer: string | null = null;
    const names = new Set<string>();
    for (const c of queue.consumers) {
      names.add(c.name);
      const live = held?.get(c.name);
      let ct = track.consumers.get(c.name);
      if (!ct) {
        ct = {
          position: c,
          consumedTotal: 0,
          consumedBytesTotal: 0,
          lastMoved: null,
          redelivered: 0,
          liveRedelivered: live?.shared?.redelivered ?? 0,
          history: new HistoryRing(Math.min(this.#options.historyPoints, CONSUMER_POINTS), ["rate", "lag"]),
        };
        track.consumers.set(c.name, ct);
      }
      const forward = comparePositions(c, ct.position) > 0;
      const step = forward && !renewed ? Math.max(0, totals.lagAfter(ct.position) - c.lag) : 0;
      if (forward) {
        ct.consumedTotal += step;
        ct.consumedBytesTotal += Math.max(0, totals.bytesAfter(ct.position) - c.lagBytes);
      }
      if (comparePositions(c, ct.position) !== 0) ct.lastMoved = at;
      ct.position = { part: c.part, position: c.position, count: c.count };
      const shared = c.kind === "shared" ? await this.#shared(queue, c, ct, live) : undefined;
      // A shared consumer's acks above its floor are not lag.
      const lag =
        shared && live?.shared
          ? Math.max(0, c.lag - (live.shared.window - live.shared.inFlight - live.shared.ready - live.shared.waiting))
          : shared && ct.files
            ? Math.max(0, c.lag - ct.files.stats.ackedAboveFloor)
            : c.lag;
      ct.history.push(at, { rate: step / elapsed, lag });
      consumed += step;
      consumedTotal += ct.consumedTotal;
      if (maxLagConsumer === null || lag > maxLag) {
        maxLag = lag;
        maxLagConsumer = c.name;
      }
      const lastSeen = Math.max(ct.lastMoved ?? 0, live?.lastUsed ?? 0) || null;
      consumers.push({
        name: c.name,
        kind: c.kind,
        part: c.part,
        position: c.position,
        count: c.count,
        lag,
        lagBytes: c.lagBytes,
        consumedTotal: ct.consumedTotal,
        consumedBytesTotal: ct.consumedBytesTotal,
        rate: ct.history.mean("rate", RATE_POINTS),
        lastSeen,
        shared,
      });
    }
    for (const name of track.consumers.keys()) if (!names.has(name)) track.consumers.delete(name);
    track.history.push(at, { produce: produced / elapsed, consume: consumed / elapsed, lag: maxLag });
    track.sample = {
      name: queue.name,
      messages: totals.messages,
      bytes: totals.bytes,
      parts: totals.partCount,
      currentPart: totals.currentPart,
      producedTotal: track.producedTotal,
      producedBytesTotal: track.producedBytesTotal,
      produceRate: track.history.mean("produce", RATE_POINTS),
      consumeRate: track.history.mean("consume", RATE_POINTS),
      consumedTotal,
      maxLag,
      maxLagConsumer,
      consumers,
    };
  }

  /** A shared consumer's numbers: live when held here, else from its files (read at most every SHARED_FILES_MS). */
  async #shared(queue: QueueOverview, c: ConsumerPosition & { name: string }, ct: ConsumerTrack, live: HeldConsumer | undefined): Promise<SharedSample> {
    const stats = live?.shared;
    if (stats) {
      // Opened again since the last sample: its own count restarted.
      ct.redelivered += stats.redelivered >= ct.liveRedelivered ? stats.redelivered - ct.liveRedelivered : stats.redelivered;
      ct.liveRedelivered = stats.redelivered;
      const oldest = stats.oldestUnacked;
      return {
        inFlight: stats.inFlight,
        redelivered: ct.redelivered,
        deadLettered: stats.deadLetteredTotal,
        oldestUnacked: oldest && { part: oldest.part, offset: oldest.offset, seq: oldest.seq, deliveries: oldest.deliveries },
        ...(stats.limitedUntil !== undefined && { limited: true }),
      };
    }
    ct.liveRedelivered = 0;
    const now = Date.now();
    if (!ct.files || now - ct.files.at >= SHARED_FILES_MS) {
      const driver = await this.#registry.driver();
      const files = await sharedFileStats(driver, queue.name, c.name, c, queue.totals.parts()).catch(() => undefined);
      if (files) ct.files = { at: now, stats: files };
    }
    const files = ct.files?.stats;
    return { inFlight: files?.pending ?? 0, redelivered: ct.redelivered, deadLettered: files?.deadLettered ?? 0, oldestUnacked: files?.oldestUnacked ?? null };
  }
}

/**
 * A function to await between steps of a long task: past `sliceMs` since the last pause, it lets
 * the event loop run (timers, requests) once for every caller at that moment (concurrent lanes all
 * wait, or the microtasks of the others would keep it from running).
 */
function pauses(sliceMs: number): () => Promise<void> | undefined {
  let since = Date.now();
  let paused: Promise<void> | undefined;
  return () => {
    if (paused || Date.now() - since < sliceMs) return paused;
    return (paused = new Promise<void>((resume) => setTimeout(resume, 0)).then(() => {
      paused = undefined;
      since = Date.now();
    }));
  };
}
