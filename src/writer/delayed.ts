/**
 * Delayed messages: kept aside in `Q_info_delayed` (storage/paths.ts) by the queue's writer, and pushed
 * into the queue only once due, so that no consumer of either kind (ordered or shared) sees
 * one early; in the queue a delayed message is where its due time put it.
 *
 * The file is a side log of frames (storage/side-log.ts):
 * - ADD, one per delayed produce, fsync'd (as the writer's durability says) before it is
 *   acknowledged: an id, the due time, when it was accepted, the produce's idempotency key
 *   (maybe empty), then its messages (type and body each), then its messages' attributes (format/attributes.ts,
 *   a run frame's payload; absent when it has none).
 * - MOVED (id, index), once a message is in the queue; synced (durability "fsync") before the
 *   message's move key is forgotten.
 * Only the pending messages' due time and where their bodies are in the file stay in memory
 * (some 60 bytes each); bodies are read back when due. The move is idempotent: each message goes
 * through the writer's idempotent push (writer/idempotency.ts) under a key of its own, so a crash
 * between the push and its MOVED frame does not deliver it twice. Once nothing is pending the
 * file is emptied (compaction that a crash cannot make lose a pending message); a file that
 * always has some pending grows until it has none.
 */
import type { DriverLock, QueueDriver } from "../core/driver";
import { type QueueProblem, VQueueError } from "../core/errors";
import type { EncodedInput } from "../format/message";
import { delayedPath } from "../storage/paths";
import { TYPE_OBJECT, TYPE_STRING } from "../format/record";
import { FieldReader, FieldWriter } from "../format/fields";
import { SideLog } from "../storage/side-log";
import { decodeAttributeFrame, encodeAttributeRun, type MessageAttributes } from "../format/attributes";

const ADD = 1;
const MOVED = 2;
/** Longest a timer may wait (setTimeout's limit): longer delays wait in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Messages moved into the queue per round. */
const MOVE_BATCH = 1000;
const utf8 = new TextEncoder();
const text = new TextDecoder();

/** A pending delayed message: its body is `length` bytes at `at` in the file. */
interface Pending {
  id: number;
  index: number;
  /** When its ADD was accepted: ids start again at 1 once the file is emptied, this tells two of them apart. */
  acceptedAt: number;
  due: number;
  type: number;
  at: number;
  length: number;
  attributes?: MessageAttributes;
}

/** A message to push now that it is due: under `key`, so that pushing it twice writes it once. */
export interface DueMessage {
  key: string;
  data: EncodedInput;
  attributes?: MessageAttributes;
}

export interface DelayedOptions {
  sync: boolean;
  /**
   * Sync MOVED frames before their keys are forgotten (durability "fsync": the pushed message is
   * durable by then). Not with "interval": a MOVED frame durable before its message would lose it.
   */
  syncMoved: boolean;
  /** The writer's lock: the fence of the side log's writes. */
  fence?: DriverLock;
  /** Most messages pending at once (`maxDelayed`): an ADD past it is refused. */
  max: number;
  onProblem: (problem: QueueProblem) => void;
  /** Pushes due messages into the queue (idempotently, by key). */
  push: (messages: DueMessage[]) => Promise<void>;
  /** True when the message of this key is in the queue already (moved before a crash cut its MOVED frame). */
  isMoved: (key: string) => boolean;
  /** Messages whose MOVED frames are written: their move keys are needed no more. */
  onMoved: (keys: string[]) => void;
  /** Each keyed ADD found at open, so that its key is known to idempotency. */
  onKeyed: (key: string, count: number, until: number, acceptedAt: number) => Promise<void>;
}

/**
 * The idempotency key of a delayed message's move: a control character no caller's key holds.
 * Ids start again at 1 once the file is emptied, while the idempotency file still holds the moves
 * of the ids before (within the window): the ADD's acceptance time makes the key unique for good.
 */
export const moveKey = (p: Pick<Pending, "id" | "index" | "acceptedAt">): string => `\u0001delay:${p.acceptedAt}:${p.id}:${p.index}`;

export class DelayedStore {
  /** Pending messages, by due time (then id, index: the order they were produced in). */
  #pending: Pending[] = [];
  #nextId = 1;
  #moved = 0;
  /** Messages of ADDs appended or being appended, not in `#pending` yet: the file must not be emptied under them. */
  #adding = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #moving: Promise<void> | undefined;
  #stopped = false;

  private constructor(
    readonly queue: string,
    readonly options: DelayedOptions,
    private log: SideLog,
  ) {}

  static async open(driver: QueueDriver, queue: string, options: DelayedOptions): Promise<DelayedStore> {
    const { log, frames } = await SideLog.open(driver, delayedPath(queue), queue, options.onProblem, options.fence);
    const store = new DelayedStore(queue, options, log);
    try {
      const moved = new Set<string>();
      for (const { payload } of frames) if (payload[0] === MOVED) moved.add(readMoved(payload));
      const pending: Pending[] = [];
      for (const { payload, at } of frames) {
        if (payload[0] !== ADD) continue;
        const add = readAdd(payload, at);
        store.#nextId = Math.max(store.#nextId, add.id + 1);
        if (add.key) await options.onKeyed(add.key, add.count, add.due, add.acceptedAt);
        for (const p of add.messages) if (!moved.has(`${p.id}:${p.index}`)) pending.push(p);
      }
      // Moved, though the crash came before its MOVED frame: not pushed again, and its MOVED
      // frame is written now, so that its key may go (forgotten by the caller once this is open).
      const late = pending.filter((p) => options.isMoved(moveKey(p)));
      if (late.length > 0) await log.append(late.map(movedFrame), options.syncMoved);
      store.#moved = moved.size + late.length;
      store.#pending = pending.filter((p) => !late.includes(p)).sort(byDue);
      await store.#compactIfWorth();
      return store;
    } catch (error) {
      await log.close();
      throw error;
    }
  }

  /** Moves what is due already (before the writer takes pushes: it was due before them), then waits for the rest. */
  async start(): Promise<void> {
    if (this.#pending[0] && this.#pending[0].due <= Date.now()) {
      this.#moving = this.#moveDue();
      await this.#moving;
      this.#moving = undefined;
    }
    this.#schedule();
  }

  /** Messages pending (not in the queue yet). */
  get pending(): number {
    return this.#pending.length;
  }

  /** Stores messages due at `due` (durable before it resolves), then waits for them to be due. */
  async add(items: readonly EncodedInput[], due: number, key = "", attributes?: MessageAttributes): Promise<void> {
    if (this.#pending.length + this.#adding + items.length > this.options.max) {
      throw new VQueueError(
        "E_FULL",
        `Queue "${this.queue}" has ${this.#pending.length + this.#adding} delayed messages pending: at most ${this.options.max} (maxDelayed). Try again once some are due.`,
      );
    }
    const id = this.#nextId++;
    const w = new FieldWriter().u8(ADD).f64(id).f64(due).f64(Date.now()).bytes(utf8.encode(key)).u32(0).u32(items.length);
    for (const item of items) w.u8(typeof item === "string" ? TYPE_STRING : TYPE_OBJECT).bytes(typeof item === "string" ? utf8.encode(item) : item);
    if (attributes) w.bytes(encodeAttributeRun({ offset: 0, seq: 0, count: 0, crc: 0, attributes }));
    const payload = w.done();
    this.#adding += items.length;
    try {
      const at = await this.log.append([payload], this.options.sync);
      for (const p of readAdd(payload, at).messages) this.#insert(p);
    } finally {
      this.#adding -= items.length;
    }
    this.#schedule();
  }

  /** Stops moving (a move under way finishes). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#moving;
  }

  close(): Promise<void> {
    return this.log.close();
  }

  #insert(p: Pending): void {
    let lo = 0;
    let hi = this.#pending.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (byDue(this.#pending[mid]!, p) <= 0) lo = mid + 1;
      else hi = mid;
    }
    this.#pending.splice(lo, 0, p);
  }

  #schedule(): void {
    if (this.#stopped || this.#moving) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const next = this.#pending[0];
    if (!next) return;
    const wait = Math.min(Math.max(0, next.due - Date.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#moving = this.#moveDue().finally(() => {
        this.#moving = undefined;
        this.#schedule();
      });
    }, wait);
    // A pending delayed message keeps no process alive: it is on storage, and waits for the next writer.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Moves what is due into the queue, a round at a time; a failed round is tried again a second later. */
  async #moveDue(): Promise<void> {
    try {
      while (!this.#stopped && this.#pending.length > 0 && this.#pending[0]!.due <= Date.now()) {
        const now = Date.now();
        let n = 0;
        while (n < MOVE_BATCH && n < this.#pending.length && this.#pending[n]!.due <= now) n++;
        const due = this.#pending.slice(0, n);
        const messages: DueMessage[] = [];
        for (const p of due) {
          const body = await this.log.read(p.at, p.length);
          messages.push({ key: moveKey(p), data: p.type === TYPE_STRING ? text.decode(body) : body, attributes: p.attributes });
        }
        await this.options.push(messages);
        // Durable (with "fsync") before the keys go: else a power cut could lose the frame and the key both.
        await this.log.append(due.map(movedFrame), this.options.syncMoved);
        this.options.onMoved(messages.map((m) => m.key));
        this.#pending.splice(0, n);
        this.#moved += n;
        await this.#compactIfWorth();
      }
    } catch {
      // The writer refuses (it failed or lost its lock) or storage failed: try again later.
      if (!this.#stopped) await new Promise((done) => setTimeout(done, 1000));
    }
  }

  /**
   * Empties the file once every message in it is moved (nothing pending can be lost so). An ADD
   * whose append is queued in the log is counted in `#adding` from before it is queued: the
   * rewrite, queued now (no await in between), would cut it off.
   */
  async #compactIfWorth(): Promise<void> {
    if (this.#moved === 0 || this.#pending.length > 0 || this.#adding > 0) return;
    await this.log.rewrite([], this.options.sync);
    this.#moved = 0;
  }
}

function byDue(a: Pending, b: Pending): number {
  return a.due - b.due || a.id - b.id || a.index - b.index;
}

function movedFrame(p: Pending): Uint8Array {
  return new FieldWriter().u8(MOVED).f64(p.id).u32(p.index).done();
}

function readMoved(payload: Uint8Array): string {
  const r = new FieldReader(payload);
  r.u8();
  return `${r.f64()}:${r.u32()}`;
}

/** An ADD frame whose payload starts at `at` in the file: its messages' bodies are located there. */
function readAdd(payload: Uint8Array, at: number): { id: number; due: number; acceptedAt: number; key: string; count: number; messages: Pending[] } {
  const r = new FieldReader(payload);
  r.u8();
  const id = r.f64();
  const due = r.f64();
  const acceptedAt = r.f64();
  const key = text.decode(r.bytes());
  const firstIndex = r.u32();
  const count = r.u32();
  const messages: Pending[] = [];
  for (let i = 0; i < count; i++) {
    const type = r.u8();
    const length = r.u32();
    messages.push({ id, index: firstIndex + i, acceptedAt, due, type, at: at + r.at, length });
    r.at += length;
  }
  // Written since attributes exist: an older frame ends with its messages.
  const frame = r.at < payload.length ? decodeAttributeFrame(r.bytes()) : undefined;
  const attributes = frame && "run" in frame ? frame.run.attributes : undefined;
  if (attributes) for (const m of messages) m.attributes = attributes;
  return { id, due, acceptedAt, key, count, messages };
}
