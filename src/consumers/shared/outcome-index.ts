import type { QueueDriver } from "../../core/driver";
import { isEnd, type StoredOutcome } from "../../format/outcome";
import { OutcomeFileReader } from "./outcome-reader";
import { onOutcomes, outcomeWakeKey } from "./outcome-wake";

/** The ends an index keeps at most, by their frames' bytes: past it the oldest go (and a look for one of them reads the log again). */
const MAX_INDEX_BYTES = 32 * 1024 * 1024;
/** An index nobody uses is kept this long: a waiter that long-polls again soon finds it caught up. */
const LINGER_MS = 30_000;

const indexes = new Map<string, OutcomeIndex>();

/**
 * The ends (`completed`, `dead`) of one outcome log by message, for `waitForOutcome`: one per log
 * and process, shared by every waiter, reading the log once from its start and then only what is
 * appended (a long poll per waiting producer would otherwise read the whole log each time).
 * Kept within `MAX_INDEX_BYTES` (the oldest ends go); a look for a message whose end may have
 * gone answers `undefined` from `find`, and the caller reads the log itself.
 */
export class OutcomeIndex {
  readonly #key: string;
  readonly #reader: OutcomeFileReader;
  readonly #pollMs: number;
  readonly #ends = new Map<string, { event: StoredOutcome; bytes: number }>();
  #bytes = 0;
  /** Ends dropped to stay within the bound: a message not found may be one of them. */
  #evicted = false;
  readonly #waiters = new Map<string, Set<(event: StoredOutcome) => void>>();
  #users = 0;
  #reading: Promise<void> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #linger: ReturnType<typeof setTimeout> | undefined;
  readonly #stopWake: () => void;

  private constructor(driver: QueueDriver, path: string, key: string, pollMs: number) {
    this.#key = key;
    this.#reader = new OutcomeFileReader(driver, path);
    this.#pollMs = pollMs;
    // A failed look is tried again at the next wake or poll (a waiter's timeout bounds the wait).
    this.#stopWake = onOutcomes(key, () => void this.#catchUp().catch(() => {}));
  }

  /** The index of log `path`, held until `release`. */
  static use(driver: QueueDriver, path: string, pollMs: number): OutcomeIndex {
    const key = outcomeWakeKey(driver.storageKey, path);
    let index = indexes.get(key);
    if (!index) indexes.set(key, (index = new OutcomeIndex(driver, path, key, pollMs)));
    index.#users++;
    clearTimeout(index.#linger);
    return index;
  }

  release(): void {
    if (--this.#users > 0) return;
    this.#linger = setTimeout(() => void this.#close(), LINGER_MS);
    (this.#linger as { unref?: () => void }).unref?.();
  }

  /**
   * The message's end, read up to now: the event, `null` when the log has none for it, or
   * `undefined` when it may have been dropped from this index (the caller reads the log).
   */
  async find(part: number, offset: number): Promise<StoredOutcome | null | undefined> {
    await this.#catchUp();
    const found = this.#ends.get(`${part}:${offset}`);
    if (found) return found.event;
    return this.#evicted ? undefined : null;
  }

  /** Resolves with the message's end once it is read (the index looks every `pollMs` while someone waits, at once after a write in this process). */
  next(part: number, offset: number, signal: AbortSignal): Promise<StoredOutcome | undefined> {
    const key = `${part}:${offset}`;
    return new Promise((resolve) => {
      let set = this.#waiters.get(key);
      if (!set) this.#waiters.set(key, (set = new Set()));
      const done = (event: StoredOutcome | undefined) => {
        set.delete(got);
        if (set.size === 0 && this.#waiters.get(key) === set) this.#waiters.delete(key);
        signal.removeEventListener("abort", aborted);
        resolve(event);
      };
      const got = (event: StoredOutcome) => done(event);
      const aborted = () => done(undefined);
      set.add(got);
      signal.addEventListener("abort", aborted, { once: true });
      // Read by a look that ended after the caller's `find`: there already.
      const there = this.#ends.get(key);
      if (there) done(there.event);
      else if (signal.aborted) aborted();
      else this.#schedule();
    });
  }

  /** Reads what was appended since the last look (one look at a time: those asking meanwhile share the one under way). */
  #catchUp(): Promise<void> {
    this.#reading ??= (async () => {
      try {
        const events = await this.#reader.read();
        if (this.#reader.restarted) {
          // Another log in its place: what this index knew was of messages of the one before.
          this.#reader.restarted = false;
          this.#ends.clear();
          this.#bytes = 0;
          this.#evicted = false;
        }
        for (const event of events) if (isEnd(event.kind)) this.#add(event);
      } finally {
        this.#reading = undefined;
      }
    })();
    return this.#reading;
  }

  #add(event: StoredOutcome): void {
    const key = `${event.part}:${event.offset}`;
    const bytes = 64 + (event.error?.length ?? 0) + (event.result === undefined ? 0 : JSON.stringify(event.result).length);
    const old = this.#ends.get(key);
    if (old) this.#bytes -= old.bytes;
    this.#ends.delete(key);
    this.#ends.set(key, { event, bytes });
    this.#bytes += bytes;
    for (const [first, entry] of this.#ends) {
      if (this.#bytes <= MAX_INDEX_BYTES) break;
      this.#ends.delete(first);
      this.#bytes -= entry.bytes;
      this.#evicted = true;
    }
    const waiting = this.#waiters.get(key);
    if (waiting) for (const resolve of [...waiting]) resolve(event);
  }

  /** Looks again after `pollMs` while someone waits. */
  #schedule(): void {
    if (this.#timer || this.#waiters.size === 0) return;
    this.#timer = setTimeout(async () => {
      this.#timer = undefined;
      await this.#catchUp().catch(() => {});
      this.#schedule();
    }, this.#pollMs);
  }

  async #close(): Promise<void> {
    if (this.#users > 0 || indexes.get(this.#key) !== this) return;
    indexes.delete(this.#key);
    clearTimeout(this.#timer);
    this.#stopWake();
    await this.#reading?.catch(() => {});
    await this.#reader.close();
  }
}
