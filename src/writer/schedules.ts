// Over 300 lines: the store (its frames, its firing loop) and the read-only listing share the frame format and the schedule entries.
/**
 * Schedules: messages the queue's writer produces by itself, by cron pattern (in a time zone) or
 * every N ms. Kept in `Q_info_sched` (storage/paths.ts), a side log of frames (storage/side-log.ts)
 * written under the writer's lock (fenced), so only the holder of the writer fires, and a writer
 * whose lock was taken over fires nothing:
 * - UPSERT, a schedule as set (also what compaction writes back, with its last firing);
 * - FIRED (name, tick), once a firing is in the queue; synced as the writer's durability says;
 * - REMOVE (name);
 * - FIRING (name, tick), before a firing produced through another writer (a partitioned queue's
 *   partition): a write fenced by this writer's lock, so that one whose lock was taken over
 *   produces nothing elsewhere either. Read back, it changes nothing.
 * A firing goes through the writer's idempotent push (writer/idempotency.ts) under a key of its
 * schedule and tick, so a crash between the push and its FIRED frame does not fire it twice: at
 * open, a firing key the idempotency store knows gets its FIRED frame.
 * Downtime: a schedule whose ticks were missed (no writer was open) fires once, for the latest
 * missed tick, and goes on from there; a new schedule fires from the next tick after it was set.
 */
import type { Cron } from "croner";
import type { DriverLock, QueueDriver } from "../core/driver";
import { type QueueProblem, VQueueError } from "../core/errors";
import type { EncodedInput } from "../format/message";
import { checkSchedule, latestTick, nextTick, parseCron, type ScheduleInput } from "./schedule-timing";
import { TYPE_OBJECT, TYPE_STRING } from "../format/record";
import { FieldReader, FieldWriter } from "../format/fields";
import { schedulesPath } from "../storage/paths";
import { SideLog, readSideFrames } from "../storage/side-log";

export { checkSchedule, MAX_EVERY_MS, MIN_EVERY_MS, type ScheduleInput } from "./schedule-timing";

const UPSERT = 1;
const FIRED = 2;
const REMOVE = 3;
const FIRING = 4;
/** No message given: each firing produces `{ schedule, tick, at }` (a JSON text). */
const DEFAULT_MESSAGE = 0;
/** Longest a timer may wait (setTimeout's limit): later ticks wait in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Most schedules of a queue. */
export const MAX_SCHEDULES = 1000;
/** Frames written before compaction is worth it, at the least. */
const MIN_COMPACT_FRAMES = 256;
const utf8 = new TextEncoder();
const text = new TextDecoder();

/** A schedule as stored, with its firings. */
export interface Schedule {
  name: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  /** What each firing produces; undefined: `{ schedule, tick, at }`. */
  message?: EncodedInput;
  /** When it was set (its ticks count from here: none before). */
  since: number;
  /** The tick time of the last firing produced (ms since the epoch). */
  lastFiredAt?: number;
  /** The tick time of the next firing. */
  nextAt?: number;
}

interface Entry extends Schedule {
  type: number;
  body: Uint8Array;
  /** The pattern, parsed (cron schedules). */
  pattern?: Cron;
}

export interface ScheduleOptions {
  sync: boolean;
  /** The writer's lock: the fence of the side log's writes. */
  fence?: DriverLock;
  onProblem: (problem: QueueProblem) => void;
  /** Write a FIRING frame before each push (the push goes to a writer this lock does not fence). */
  fencedIntent?: boolean;
  /** Produces a firing into the queue, idempotently under `key`. */
  push: (key: string, data: EncodedInput) => Promise<void>;
  /** True when the firing of this key is in the queue already. */
  isFired: (key: string) => boolean;
  /** The firing keys the idempotency store holds (to settle those a crash left without FIRED). */
  firedKeys: () => string[];
  /** A firing whose FIRED frame is written: its key is needed no more. */
  onFired: (key: string) => void;
}

/** The idempotency key of a firing: a control character no caller's key holds (writer/idempotency.ts). */
export const FIRE_KEY_PREFIX = "\u0001sched:";
export const fireKey = (name: string, tick: number): string => `${FIRE_KEY_PREFIX}${tick}:${name}`;

function parseFireKey(key: string): { name: string; tick: number } | undefined {
  if (!key.startsWith(FIRE_KEY_PREFIX)) return undefined;
  const rest = key.slice(FIRE_KEY_PREFIX.length);
  const colon = rest.indexOf(":");
  const tick = Number(rest.slice(0, colon));
  return colon > 0 && Number.isSafeInteger(tick) ? { tick, name: rest.slice(colon + 1) } : undefined;
}

/** The ticks a schedule counts from: after the last firing, else after it was set. */
const lastOf = (s: Schedule): number => Math.max(s.since, s.lastFiredAt ?? 0);

export class ScheduleStore {
  #entries = new Map<string, Entry>();
  #frames = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #firing: Promise<void> | undefined;
  #started = false;
  #stopped = false;

  private constructor(
    readonly queue: string,
    readonly options: ScheduleOptions,
    private log: SideLog,
  ) {}

  static async open(driver: QueueDriver, queue: string, options: ScheduleOptions): Promise<ScheduleStore> {
    const { log, frames } = await SideLog.open(driver, schedulesPath(queue), queue, options.onProblem, options.fence);
    const store = new ScheduleStore(queue, options, log);
    try {
      for (const { payload } of frames) applyFrame(store.#entries, payload);
      store.#frames = frames.length;
      // Fired, though the crash came before its FIRED frame: written now, so that its key may go.
      const late: Uint8Array[] = [];
      for (const key of options.firedKeys()) {
        const fired = parseFireKey(key);
        const entry = fired && store.#entries.get(fired.name);
        if (entry && fired.tick > lastOf(entry)) {
          entry.lastFiredAt = fired.tick;
          late.push(firedFrame(fired.name, fired.tick));
        }
      }
      if (late.length > 0) await log.append(late, options.sync);
      await store.#compactIfWorth();
      return store;
    } catch (error) {
      await log.close();
      throw error;
    }
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Every schedule, by name, with its next tick. */
  list(): Schedule[] {
    return listOf(this.#entries);
  }

  get(name: string): Schedule | undefined {
    const entry = this.#entries.get(name);
    return entry && view(entry);
  }

  /**
   * Sets schedule `name` (durable before it resolves). The same timing again keeps its ticks and
   * last firing (a message changed only); another timing counts its ticks from now.
   */
  async upsert(name: string, input: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    const checked = checkSchedule(name, input);
    const old = this.#entries.get(checked.name);
    if (!old && this.#entries.size >= MAX_SCHEDULES)
      throw new VQueueError("E_FULL", `Queue "${this.queue}" has ${MAX_SCHEDULES} schedules: at most ${MAX_SCHEDULES}. Remove one first.`);
    const same = old && old.cron === checked.cron && old.tz === checked.tz && old.everyMs === checked.everyMs;
    const entry: Entry = {
      ...checked,
      since: same ? old.since : Date.now(),
      lastFiredAt: old?.lastFiredAt,
      ...encodeMessage(checked.message),
    };
    await this.log.append([upsertFrame(entry)], this.options.sync);
    this.#frames++;
    this.#entries.set(entry.name, entry);
    this.#schedule();
    return { schedule: view(entry), created: !old };
  }

  /** Removes schedule `name`: false when there is none. */
  async remove(name: string): Promise<boolean> {
    if (!this.#entries.has(name)) return false;
    await this.log.append([new FieldWriter().u8(REMOVE).bytes(utf8.encode(name)).done()], this.options.sync);
    this.#frames++;
    this.#entries.delete(name);
    await this.#compactIfWorth();
    this.#schedule();
    return true;
  }

  /** Fires what was missed (once per schedule: its latest tick), then each tick when due (the writer is open). */
  async start(): Promise<void> {
    this.#started = true;
    this.#firing = this.#fireDue();
    await this.#firing;
    this.#firing = undefined;
    this.#schedule();
  }

  /** Stops firing (a firing under way finishes). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#firing;
  }

  close(): Promise<void> {
    return this.log.close();
  }

  #schedule(): void {
    if (!this.#started || this.#stopped || this.#firing) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const s of this.#entries.values()) next = Math.min(next, nextTick(s, Math.max(lastOf(s), now - 1)) ?? Number.POSITIVE_INFINITY);
    if (next === Number.POSITIVE_INFINITY) return;
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#firing = this.#fireDue().finally(() => {
          this.#firing = undefined;
          this.#schedule();
        });
      },
      Math.min(Math.max(0, next - now), MAX_TIMER_MS),
    );
    // A schedule keeps no process alive: it is on storage, and waits for the next writer.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Fires each schedule's latest due tick (one firing however many were missed); a failure is tried again a second later. */
  async #fireDue(): Promise<void> {
    try {
      const now = Date.now();
      for (const s of [...this.#entries.values()]) {
        if (this.#stopped) return;
        const tick = latestTick(s, lastOf(s), now);
        if (tick === undefined) continue;
        const key = fireKey(s.name, tick);
        if (this.options.fencedIntent) {
          await this.log.append([new FieldWriter().u8(FIRING).bytes(utf8.encode(s.name)).f64(tick).done()], false);
          this.#frames++;
        }
        if (!this.options.isFired(key)) await this.options.push(key, s.type === DEFAULT_MESSAGE ? defaultMessage(s.name, tick) : (s.message as EncodedInput));
        // Durable before the key goes: else a crash could lose both, and the tick fire again.
        await this.log.append([firedFrame(s.name, tick)], this.options.sync);
        this.#frames++;
        this.options.onFired(key);
        // Removed or set anew meanwhile: its own entry says what it fired.
        const current = this.#entries.get(s.name);
        if (current) current.lastFiredAt = Math.max(current.lastFiredAt ?? 0, tick);
      }
      await this.#compactIfWorth();
    } catch {
      // The writer refuses (it failed or lost its lock) or storage failed: try again later.
      if (!this.#stopped) await new Promise((done) => setTimeout(done, 1000));
    }
  }

  /** Rewrites the file as one UPSERT per schedule (with its last firing) once the frames outnumber them well. */
  async #compactIfWorth(): Promise<void> {
    if (this.#frames <= Math.max(MIN_COMPACT_FRAMES, 4 * this.#entries.size)) return;
    const payloads = [...this.#entries.values()].map(upsertFrame);
    await this.log.rewrite(payloads, this.options.sync);
    this.#frames = payloads.length;
  }
}

/**
 * The schedules of `queue` as its storage has them, read without the writer's lock (no write:
 * a torn tail is left to the writer; during a compaction, its journal): for any instance to list them.
 */
export async function readSchedules(driver: QueueDriver, queue: string): Promise<Schedule[]> {
  const entries = new Map<string, Entry>();
  for (const { payload } of await readSideFrames(driver, schedulesPath(queue))) applyFrame(entries, payload);
  return listOf(entries);
}

function listOf(entries: Map<string, Entry>): Schedule[] {
  return [...entries.values()].sort((a, b) => (a.name < b.name ? -1 : 1)).map(view);
}

/** A schedule as callers see it, with its next tick. */
function view(s: Entry): Schedule {
  const { type: _t, body: _b, pattern: _p, ...schedule } = s;
  return { ...schedule, nextAt: nextTick(s, Math.max(lastOf(s), Date.now())) };
}

/** A frame read back, applied to `entries`. */
function applyFrame(entries: Map<string, Entry>, payload: Uint8Array): void {
  const r = new FieldReader(payload);
  const kind = r.u8();
  const name = text.decode(r.bytes());
  if (kind === REMOVE) entries.delete(name);
  else if (kind === FIRED) {
    const entry = entries.get(name);
    const tick = r.f64();
    if (entry) entry.lastFiredAt = Math.max(entry.lastFiredAt ?? 0, tick);
  } else if (kind === UPSERT) {
    const since = r.f64();
    const lastFiredAt = r.f64() || undefined;
    const everyMs = r.f64() || undefined;
    const cron = text.decode(r.bytes()) || undefined;
    const tz = text.decode(r.bytes()) || undefined;
    const type = r.u8();
    const body = r.bytes().slice();
    const message = type === DEFAULT_MESSAGE ? undefined : type === TYPE_STRING ? text.decode(body) : body;
    const pattern = cron === undefined ? undefined : parseCron(cron, tz);
    entries.set(name, { name, cron, tz, everyMs, message, since, lastFiredAt, type, body, pattern });
  }
}

/** The message of a schedule without one: the schedule's name and the firing's tick. */
function defaultMessage(name: string, tick: number): string {
  return JSON.stringify({ schedule: name, tick, at: new Date(tick).toISOString() });
}

function encodeMessage(message: EncodedInput | undefined): { type: number; body: Uint8Array } {
  if (message === undefined) return { type: DEFAULT_MESSAGE, body: new Uint8Array(0) };
  return typeof message === "string" ? { type: TYPE_STRING, body: utf8.encode(message) } : { type: TYPE_OBJECT, body: message };
}

function upsertFrame(s: Entry): Uint8Array {
  return new FieldWriter()
    .u8(UPSERT)
    .bytes(utf8.encode(s.name))
    .f64(s.since)
    .f64(s.lastFiredAt ?? 0)
    .f64(s.everyMs ?? 0)
    .bytes(utf8.encode(s.cron ?? ""))
    .bytes(utf8.encode(s.tz ?? ""))
    .u8(s.type)
    .bytes(s.body)
    .done();
}

function firedFrame(name: string, tick: number): Uint8Array {
  return new FieldWriter().u8(FIRED).bytes(utf8.encode(name)).f64(tick).done();
}
