import type { ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import { readPartEnd } from "./position-check";
import { isWriterGone, listParts, readQueueInfo } from "./recovery";

/**
 * Running totals of a queue (bytes and messages per part, and their sums), held per process
 * and storage, so that lag, counts and sizes cost no walk of the parts (issue 12).
 *
 * - A sealed part (any part before the current one) never changes: it is measured once, from
 *   its file as `readPartEnd` does, and kept. The first use walks the parts once; that is the
 *   only cost that grows with the queue, once per process and queue.
 * - The current part: from the writer's memory when it is in this process (no I/O), else from
 *   its push info line (one small read), or its file once the writer is gone.
 * - New parts: the writer in this process reports its rolls; another process's are seen from
 *   `Q_info_queue` (read on each call), and a listing confirms which parts exist.
 * - Parts deleted (retention, purge) by any process: the parts are listed again at most once a
 *   second, and a part no longer listed leaves the totals. In this process, `invalidateTotals`
 *   makes that immediate.
 */

export interface PartTotals {
  id: number;
  bytes: number;
  messages: number;
}

/** A queue's totals at one moment. */
export interface QueueTotals {
  /** The writer's current part (named by the queue info line; its directory may not exist yet). */
  currentPart: number;
  /** Records in the current part (0 when it does not exist). */
  currentCount: number;
  /** Where the current part ends (0 when it does not exist). */
  currentEdge: number;
  messages: number;
  bytes: number;
  /** How many parts exist. */
  partCount: number;
  /** Every existing part, oldest first (a fresh array). */
  parts(): PartTotals[];
  /** Messages after `position`: O(log parts). */
  lagAfter(position: ConsumerPosition): number;
  /** Bytes of the records after `position`: O(log parts). */
  bytesAfter(position: ConsumerPosition): number;
}

/** How often, at most, the parts are listed to notice parts that vanished. */
const LIST_INTERVAL_MS = 1000;
/**
 * Sealed parts measured at once during the first walk: round trips overlap on a driver over a
 * network; on local files (fs) 1, 4 and 16 measured the same within noise.
 */
const WALK_CONCURRENCY = 8;
/** Queues whose totals are kept; the least recently used beyond that are forgotten (and recovered if asked again). */
const MAX_QUEUES = 10_000;
const ignoreProblems = () => {};

interface PartEnd {
  edge: number;
  count: number;
}

/** A writer's position as it last announced it (the values of its push info line). */
interface Live extends PartEnd {
  part: number;
}

/** The sealed parts in id order, with suffix sums of their messages, for one snapshot. */
interface Sums {
  ids: number[];
  bytes: number[];
  messages: number[];
  /** `after[i]`: messages in the sealed parts from index `i` on. */
  after: number[];
  /** `afterBytes[i]`: bytes of the sealed parts from index `i` on. */
  afterBytes: number[];
  totalBytes: number;
}

class TotalsCache {
  /** Measured sealed parts: they never change, so they are kept until they vanish. */
  readonly sealed = new Map<number, { bytes: number; messages: number }>();
  /** Part ids that exist, ascending: the last listing, plus the parts the writer here made since. */
  ids: number[] = [];
  listedAt = -Infinity;
  /** The current part at the last refresh. */
  current = -1;
  /** Set by `invalidateTotals(..., "listing")`: the next call lists the parts. */
  mustList = false;
  #sums: Sums | undefined;
  /** Refreshes run one at a time: concurrent first calls walk the parts once, not each. */
  #chain: Promise<unknown> = Promise.resolve();

  changed(): void {
    this.#sums = undefined;
  }

  /** The writer in this process finished part `part` with `end`, and now writes `next`. */
  seal(part: number, end: PartEnd, next: number): void {
    this.sealed.set(part, { bytes: end.edge, messages: end.count });
    this.addId(part);
    this.addId(next);
    this.changed();
  }

  /** Adds an existing part's id; parts are made in order, so it is usually appended. */
  addId(id: number): void {
    const last = this.ids.at(-1);
    if (last === undefined || id > last) this.ids.push(id);
    else if (!this.ids.includes(id)) this.ids = [...this.ids, id].sort((a, b) => a - b);
  }

  refresh(driver: QueueDriver, queue: string, live: () => Live | undefined, listed?: number[]): Promise<QueueTotals | undefined> {
    const run = this.#chain.then(() => this.#refresh(driver, queue, live, listed));
    this.#chain = run.catch(() => {});
    return run;
  }

  async #refresh(driver: QueueDriver, queue: string, liveNow: () => Live | undefined, listed?: number[]): Promise<QueueTotals | undefined> {
    const live = liveNow();
    const info = live ? undefined : await readQueueInfo(driver, queue, ignoreProblems);
    const named = live?.part ?? info?.part ?? -1;
    const now = Date.now();
    if (listed || this.mustList || now - this.listedAt >= LIST_INTERVAL_MS || named > (this.ids.at(-1) ?? -1)) {
      this.mustList = false;
      this.ids = listed ? [...listed] : await listParts(driver, queue);
      this.listedAt = now; // only once listed: a failed listing is tried again on the next call
      const exist = new Set(this.ids);
      for (const id of this.sealed.keys()) if (!exist.has(id)) this.sealed.delete(id);
      this.changed();
    }
    if (live) this.addId(live.part);
    const current = Math.max(named, this.ids.at(-1) ?? -1);
    if (current < 0) return undefined; // no info line and no part: no such queue
    // The current part never goes back but when the queue was deleted and made again (by another
    // process): its parts reuse the ids, so nothing measured of the old ones holds.
    if (current < this.current) {
      this.sealed.clear();
      this.changed();
    }
    this.current = current;
    // A part at or after the current one is not sealed (a queue deleted and made again restarts at 0).
    for (const id of this.sealed.keys()) {
      if (id < current) continue;
      this.sealed.delete(id);
      this.changed();
    }
    const unmeasured = this.ids.filter((id) => id < current && !this.sealed.has(id));
    for (let i = 0; i < unmeasured.length; i += WALK_CONCURRENCY) {
      await Promise.all(
        unmeasured.slice(i, i + WALK_CONCURRENCY).map(async (id) => {
          const end = await readPartEnd(driver, queue, id, true);
          this.sealed.set(id, { bytes: end.edge, messages: end.count });
        }),
      );
      this.changed();
    }
    // The writer here rolled while this refresh waited for I/O: again, from its new part (nothing to measure).
    const latest = liveNow();
    if (live && latest && latest.part !== live.part) return this.#refresh(driver, queue, liveNow);
    let end: PartEnd | undefined;
    if (live) end = live;
    else if (this.ids.at(-1) === current) end = await readPartEnd(driver, queue, current, await isWriterGone(driver, queue));
    return snapshot(this.#sumsBelow(current), current, end);
  }

  #sumsBelow(current: number): Sums {
    if (this.#sums && (this.#sums.ids.at(-1) ?? -1) < current) return this.#sums;
    const ids = [...this.sealed.keys()].filter((id) => id < current).sort((a, b) => a - b);
    const bytes = ids.map((id) => this.sealed.get(id)!.bytes);
    const messages = ids.map((id) => this.sealed.get(id)!.messages);
    const after = Array.from<number>({ length: ids.length + 1 }).fill(0);
    const afterBytes = [...after];
    for (let i = ids.length - 1; i >= 0; i--) {
      after[i] = after[i + 1]! + messages[i]!;
      afterBytes[i] = afterBytes[i + 1]! + bytes[i]!;
    }
    this.#sums = { ids, bytes, messages, after, afterBytes, totalBytes: afterBytes[0]! };
    return this.#sums;
  }
}

/** Totals from the sealed parts' sums and the current part's end (undefined: it does not exist). */
function snapshot(sums: Sums, current: number, end: PartEnd | undefined): QueueTotals {
  const count = end?.count ?? 0;
  return {
    currentPart: current,
    currentCount: count,
    currentEdge: end?.edge ?? 0,
    partCount: sums.ids.length + (end ? 1 : 0),
    messages: sums.after[0]! + count,
    bytes: sums.totalBytes + (end?.edge ?? 0),
    parts: () => {
      const parts = sums.ids.map((id, i) => ({ id, bytes: sums.bytes[i]!, messages: sums.messages[i]! }));
      if (end) parts.push({ id: current, bytes: end.edge, messages: end.count });
      return parts;
    },
    lagAfter: (position) => {
      const i = firstAfter(sums.ids, position.part);
      let lag = sums.after[i]!;
      if (i > 0 && sums.ids[i - 1] === position.part) lag += Math.max(0, sums.messages[i - 1]! - position.count);
      if (current === position.part) lag += Math.max(0, count - position.count);
      else if (current > position.part) lag += count;
      return lag;
    },
    bytesAfter: (position) => {
      const edge = end?.edge ?? 0;
      const i = firstAfter(sums.ids, position.part);
      let after = sums.afterBytes[i]!;
      if (i > 0 && sums.ids[i - 1] === position.part) after += Math.max(0, sums.bytes[i - 1]! - position.position);
      if (current === position.part) after += Math.max(0, edge - position.position);
      else if (current > position.part) after += edge;
      return after;
    },
  };
}

/** Index of the first id greater than `part` in ascending `ids`. */
function firstAfter(ids: number[], part: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ids[mid]! <= part) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const caches = new Map<string, TotalsCache>();
const writers = new Map<string, { live: Live | undefined }>();
const keyOf = (driver: QueueDriver, queue: string) => `${driver.storageKey}\u0000${queue}`;

/**
 * The totals of `queue` now, or undefined when there is no such queue. `listed`: its part ids
 * from a listing just made (the overview lists the storage once for every queue).
 */
export function queueTotals(driver: QueueDriver, queue: string, listed?: number[]): Promise<QueueTotals | undefined> {
  const key = keyOf(driver, queue);
  let cache = caches.get(key);
  if (cache)
    caches.delete(key); // re-inserted last: the map's order is least recently used first
  else cache = new TotalsCache();
  caches.set(key, cache);
  if (caches.size > MAX_QUEUES) caches.delete(caches.keys().next().value!);
  return cache.refresh(driver, queue, () => writers.get(key)?.live, listed);
}

/**
 * Forgets what this process knows of a queue's parts, for a change it made itself: `"all"`
 * (a purge, a deleted queue: the next call walks the parts again), or `"listing"` (whole
 * parts removed, as retention does: the next call lists the parts, and measures nothing again).
 * Without it, parts removed by anyone leave the totals within about a second.
 */
export function invalidateTotals(driver: QueueDriver, queue: string, scope: "all" | "listing" = "all"): void {
  const key = keyOf(driver, queue);
  if (scope === "all") caches.delete(key);
  else {
    const cache = caches.get(key);
    if (cache) cache.mustList = true;
  }
}

export interface WriterTotals {
  /** The writer's position, each time it writes its push info line: a new part means the old one is sealed. */
  report(part: number, edge: number, count: number): void;
  release(): void;
}

/** Links the queue's writer in this process to the totals: its position then costs no I/O. */
export function trackWriter(driver: QueueDriver, queue: string): WriterTotals {
  const key = keyOf(driver, queue);
  const slot: { live: Live | undefined } = { live: undefined };
  writers.set(key, slot);
  return {
    report(part, edge, count) {
      const before = slot.live;
      slot.live = { part, edge, count };
      if (before && before.part < part) caches.get(key)?.seal(before.part, before, part);
    },
    release() {
      if (writers.get(key) === slot) writers.delete(key);
    },
  };
}
