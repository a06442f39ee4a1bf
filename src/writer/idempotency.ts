/**
 * Idempotent produce: a produce that carries a key already accepted within the window
 * (`idempotencyWindowMs`) is not written again and answers the first result. Kept by the
 * queue's writer (one process, under its lock) in `Q_info_idem` (storage/paths.ts), a side log of
 * frames (storage/side-log.ts):
 * - INTENT, before the data: the key, the queue's end when its batch is written (part and
 *   record count) and where in that batch its messages are; fsync'd as the writer's durability
 *   says, before the batch's data goes out.
 * - DONE, after the data is as durable as promised: the key, when it was accepted, the result.
 *   Not fsync'd: an INTENT without its DONE is settled at the next open from the part files.
 * At open, an INTENT without DONE is looked up in the recovered queue: when the records after
 * its batch's start reach its messages, they were written (they are answered from there: no
 * duplicate); when not (the crash came first, or the batch failed), the key is forgotten, and a
 * retry writes them. So a crash never makes a retry be told "accepted" for a message that is
 * not in the queue, and, for a whole batch, never writes it twice.
 */
import type { DriverLock, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import type { MessagePosition } from "../format/message";
import { idempotencyPath } from "../storage/paths";
import { readPushInfo } from "../log/recovery";
import { resolveSeek } from "../log/seek";
import { FieldReader, FieldWriter } from "../format/fields";
import { SideLog } from "../storage/side-log";

const INTENT = 1;
const DONE = 2;
/** Frames written before compaction is worth it, at the least (else 4 per key kept). */
const MIN_COMPACT_FRAMES = 1000;
const ascii = new TextEncoder();
const latin = new TextDecoder("latin1");

/** What a produce answered: where its messages landed, or, delayed, when they enter the queue. */
export interface ProduceResult {
  count: number;
  first?: MessagePosition;
  last?: MessagePosition;
  /** A delayed produce: when its messages enter the queue (ms since the epoch). */
  until?: number;
  /** True when this is the answer of an earlier produce with the same key (nothing was written). */
  replayed: boolean;
}

type Stored = Omit<ProduceResult, "replayed">;

interface Entry {
  result: Stored;
  acceptedAt: number;
}

/** A keyed push of a batch about to be written: `skip` messages of the batch come before its `count`. */
export interface Intent {
  key: string;
  skip: number;
  count: number;
}

export interface IdempotencyOptions {
  windowMs: number;
  maxKeys: number;
  sync: boolean;
  onProblem: (problem: QueueProblem) => void;
  /** The writer's lock: the fence of the side log's writes. */
  fence?: DriverLock;
}

/** Keys: 1 to 255 printable ASCII characters (an HTTP header value as it is). */
export const KEY_RULE = "1 to 255 printable ASCII characters";

/** The problem with an idempotency key, or undefined. */
export function checkKey(key: unknown, name = "idempotency key"): string | undefined {
  if (typeof key === "string" && key.length >= 1 && key.length <= 255 && /^[\x20-\x7e]+$/.test(key)) return undefined;
  return `Invalid ${name} ${typeof key === "string" ? JSON.stringify(key.slice(0, 64)) : `(${typeof key})`}: use ${KEY_RULE}.`;
}

export class IdempotencyStore {
  /** Callers' keys, oldest first: `maxKeys` at most. */
  #entries = new Map<string, Entry>();
  /** The engine's own keys (a delayed message's move, starting with a control character no caller's key holds): outside the cap, forgotten once done with. */
  #internal = new Map<string, Entry>();
  #inflight = new Map<string, Promise<Stored>>();
  /** INTENTs written and not settled by a DONE: compaction keeps them (a crash settles them at open from the queue). */
  #intents = new Map<string, { payload: Uint8Array; at: number }>();
  #frames = 0;
  #compacting: Promise<void> | undefined;
  #done: Uint8Array[] = [];
  #doneWritten: Promise<unknown> | undefined;

  private constructor(
    readonly options: IdempotencyOptions,
    private log: SideLog,
  ) {}

  /**
   * Opens the queue's store (the writer has recovered the queue: its info lines are exact),
   * settling the INTENTs a crash left without DONE.
   */
  static async open(driver: QueueDriver, queue: string, options: IdempotencyOptions): Promise<IdempotencyStore> {
    const { log, frames } = await SideLog.open(driver, idempotencyPath(queue), queue, options.onProblem, options.fence);
    const store = new IdempotencyStore(options, log);
    const intents = new Map<string, { acceptedAt: number; part: number; base: number; skip: number; count: number }>();
    for (const { payload } of frames) {
      const r = new FieldReader(payload);
      const kind = r.u8();
      const key = latin.decode(r.bytes());
      const acceptedAt = r.f64();
      if (kind === INTENT) intents.set(key, { acceptedAt, part: r.f64(), base: r.f64(), skip: r.u32(), count: r.u32() });
      else if (kind === DONE) {
        intents.delete(key);
        store.#set(key, { acceptedAt, result: readResult(r) });
      }
    }
    try {
      for (const [key, intent] of intents) {
        const first = await locate(driver, queue, intent.part, intent.base, intent.skip);
        const last = first && (await locate(driver, queue, intent.part, intent.base, intent.skip + intent.count - 1));
        // Part of a batch only (its write was cut short): not accepted, a retry writes it all.
        if (first && last) store.#set(key, { acceptedAt: intent.acceptedAt, result: { count: intent.count, first, last } });
      }
    } catch (error) {
      await log.close();
      throw error;
    }
    return store;
  }

  /**
   * The first result of `key` while its window lasts (undefined when unknown or expired). The
   * engine's own keys have no window: a move's key is kept until its MOVED frame is written
   * (`forget`, `forgetMoves`), however long that takes, else the message could be moved twice.
   */
  known(key: string): Stored | undefined {
    const internal = this.#internal.get(key);
    if (internal) return internal.result;
    const entry = this.#entries.get(key);
    if (entry && entry.acceptedAt + this.options.windowMs <= Date.now()) return undefined;
    return entry?.result;
  }

  /**
   * Runs `produce` once per key: a key accepted within the window answers its first result,
   * one in flight answers what that one answers (or, if it fails, runs again).
   */
  async run(key: string, produce: () => Promise<Stored>): Promise<ProduceResult> {
    for (;;) {
      const known = this.known(key);
      if (known) return { ...known, replayed: true };
      const inflight = this.#inflight.get(key);
      if (!inflight) break;
      const outcome = await inflight.then(
        (result) => result,
        () => undefined,
      );
      if (outcome) return { ...outcome, replayed: true };
    }
    const running = produce();
    this.#inflight.set(key, running);
    try {
      const result = await running;
      await this.accepted(key, result, Date.now());
      return { ...result, replayed: false };
    } finally {
      this.#inflight.delete(key);
    }
  }

  /** Records an accepted key (DONE; not fsync'd, see above), within the cap. */
  async accepted(key: string, result: Stored, acceptedAt: number): Promise<void> {
    this.#set(key, { acceptedAt, result });
    this.#intents.delete(key);
    this.#done.push(writeResult(new FieldWriter().u8(DONE).bytes(ascii.encode(key)).f64(acceptedAt), result).done());
    // The DONEs of one batch's pushes (answered together) go out in one append.
    this.#doneWritten ??= Promise.resolve().then(() => {
      const payloads = this.#done.splice(0);
      this.#doneWritten = undefined;
      this.#frames += payloads.length;
      return this.log.append(payloads, false);
    });
    await this.#doneWritten;
    // Oldest first (the map's order is the order of acceptance).
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.options.maxKeys) break;
      this.#entries.delete(oldest);
    }
    // Produces in flight need not wait: compaction keeps their INTENTs (see `compact`).
    if (this.#frames > Math.max(MIN_COMPACT_FRAMES, 4 * (this.#entries.size + this.#internal.size + this.#intents.size))) {
      this.#compacting ??= this.compact().finally(() => (this.#compacting = undefined));
      await this.#compacting;
    }
  }

  /** Forgets keys that are no longer needed (a delayed message's move, once its MOVED frame is written): they leave room under the cap. */
  forget(keys: readonly string[]): void {
    for (const key of keys) this.#internal.delete(key);
  }

  /** The engine's own keys held now that start with `prefix` (a schedule's firings, settled at open: writer/schedules.ts). */
  internalKeys(prefix: string): string[] {
    return [...this.#internal.keys()].filter((key) => key.startsWith(prefix));
  }

  /** Forgets every move's key (at open, once the delayed store has written the MOVED frames of the moves they tell of). */
  forgetMoves(): void {
    this.#internal.clear();
  }

  #set(key: string, entry: Entry): void {
    const map = key.charCodeAt(0) < 0x20 ? this.#internal : this.#entries;
    map.delete(key);
    map.set(key, entry);
  }

  /** INTENTs of a batch that starts after record `base` of `part`, made durable before its data. */
  async intents(intents: readonly Intent[], part: number, base: number): Promise<void> {
    const now = Date.now();
    const payloads = intents.map((i) => new FieldWriter().u8(INTENT).bytes(ascii.encode(i.key)).f64(now).f64(part).f64(base).u32(i.skip).u32(i.count).done());
    // Known before the append is queued: a compaction queued after it keeps them.
    intents.forEach((i, n) => this.#intents.set(i.key, { payload: payloads[n]!, at: now }));
    await this.log.append(payloads, this.options.sync);
    this.#frames += payloads.length;
  }

  /**
   * Rewrites the file with the keys still in their window (and the settled INTENTs as DONEs),
   * then the INTENTs without DONE: those of produces in flight, and of failed ones within the
   * window (their batch may be in the queue: the next open settles them from there).
   */
  async compact(): Promise<void> {
    const now = Date.now();
    for (const [key, entry] of this.#entries) if (entry.acceptedAt + this.options.windowMs <= now) this.#entries.delete(key);
    for (const [key, intent] of this.#intents) if (!this.#inflight.has(key) && intent.at + this.options.windowMs <= now) this.#intents.delete(key);
    const payloads = [...this.#entries, ...this.#internal].map(([key, e]) =>
      writeResult(new FieldWriter().u8(DONE).bytes(ascii.encode(key)).f64(e.acceptedAt), e.result).done(),
    );
    for (const intent of this.#intents.values()) payloads.push(intent.payload);
    await this.log.rewrite(payloads, this.options.sync);
    this.#frames = payloads.length;
  }

  close(): Promise<void> {
    return this.log.close();
  }
}

function writeResult(w: FieldWriter, result: Stored): FieldWriter {
  w.u32(result.count);
  if (result.until !== undefined) return w.u8(1).f64(result.until);
  w.u8(0);
  for (const p of [result.first!, result.last!]) w.f64(p.part).f64(p.offset).f64(p.seq);
  return w;
}

function readResult(r: FieldReader): Stored {
  const count = r.u32();
  if (r.u8() === 1) return { count, until: r.f64() };
  const first = { part: r.f64(), offset: r.f64(), seq: r.f64() };
  const last = { part: r.f64(), offset: r.f64(), seq: r.f64() };
  return { count, first, last };
}

/**
 * The position of record number `skip` (from 0) after record `base` of `part`, counting on
 * through the parts after it (a batch may roll into the next part); undefined when the queue
 * ends before it.
 */
async function locate(driver: QueueDriver, queue: string, part: number, base: number, skip: number): Promise<MessagePosition | undefined> {
  let left = skip;
  for (let p = part, from = base; ; p++, from = 0) {
    const info = await readPushInfo(driver, queue, p);
    if (!info) return undefined;
    if (from + left < info.count) {
      const seq = from + left + 1;
      const position = await resolveSeek(driver, queue, { part: p, seq });
      return { part: p, offset: position.position, seq };
    }
    left -= Math.max(0, info.count - from);
  }
}
