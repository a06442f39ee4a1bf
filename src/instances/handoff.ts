/**
 * Hand-over of a lock on request, between instances (processes, hosts) that share a storage.
 * A lock is held until its holder lets go (or dies); an instance that wants a lock held
 * elsewhere asks for it by writing a want marker (storage/paths.ts: `<q>_info_wantw`,
 * `<q>_info_wantc_<c>`) and retries the lock until the holder, which reads the markers of what
 * it holds (partitions/set.ts), lets go. Generic for any lock path: the caller gives the marker's
 * path and a `tryTake` that opens whatever the lock guards.
 */
import { integer, throwProblems } from "../core/check";
import type { QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { sleep } from "../core/sleep";
import { writeWhole } from "../storage/write-whole";

export interface HandoffOptions {
  /** How long a hand-over request waits for the holder to let go; then `E_LOCKED`. @default 5000 */
  handoffTimeoutMs?: number;
  /** A holder keeps what it took at least this long before it hands it over, so that a busy partition is not passed back and forth per batch. @default 100 */
  minHoldMs?: number;
  /** A holder lets go of what it did not use for this long. @default 30000 */
  idleMs?: number;
}

export interface ConsumerHandoffOptions extends HandoffOptions {
  /**
   * A consumer asked to hand a partition over waits this long for its handed-out messages to be
   * committed (acknowledged); then it lets go anyway, and the new holder delivers them again. @default 30000
   */
  handoffGraceMs?: number;
}

export type ResolvedHandoffOptions = Required<ConsumerHandoffOptions>;

/** The defaults, in one place. */
export const HANDOFF_DEFAULTS: ResolvedHandoffOptions = { handoffTimeoutMs: 5000, minHoldMs: 100, idleMs: 30_000, handoffGraceMs: 30_000 };
/** A marker older than this is ignored: the instance that wrote it gave up or died. */
export const WANT_FRESH_MS = 2000;
/** How often a wanter retries the lock. */
export const RETRY_MS = 15;
/** How often a holder reads the markers of what it holds. */
export const CHECK_MS = 50;
/**
 * As `CHECK_MS`, when the driver watches the base directory and says which entry changed: a
 * marker written wakes the holder at once, so the poll is only a safety net (for an event the
 * watch missed). Reading every held marker 20 times a second was a tenth of a busy instance's CPU.
 */
export const WATCHED_CHECK_MS = 500;
/** A waiting wanter rewrites its marker this often, so that it stays fresh. */
const REFRESH_MS = 500;

const MARKER = /^v-queue want (\d{1,16}) ([A-Za-z0-9]{1,64})\n/;

/** The hand-over options over their defaults, every problem in one `E_OPTION`. */
export function resolveHandoffOptions(options: ConsumerHandoffOptions): ResolvedHandoffOptions {
  const resolved = { ...HANDOFF_DEFAULTS };
  for (const key of Object.keys(HANDOFF_DEFAULTS) as (keyof ResolvedHandoffOptions)[]) if (options[key] !== undefined) resolved[key] = options[key];
  throwProblems([
    integer(10, 600_000)(resolved.handoffTimeoutMs, "handoffTimeoutMs"),
    integer(0, 600_000)(resolved.minHoldMs, "minHoldMs"),
    integer(100, 24 * 3600_000)(resolved.idleMs, "idleMs"),
    integer(0, 24 * 3600_000)(resolved.handoffGraceMs, "handoffGraceMs"),
  ]);
  return resolved;
}

/** What a request says of its wanter, besides who it is (lines after the first, which markers of older versions lack). */
export interface WantContext {
  /** How many instances share what is asked for, as the wanter counts them (instances/members.ts). */
  members?: number;
  /** Granted whatever the holder's share: the wanter does not read it as one of the sharers (a seek). */
  force?: boolean;
}

/** A fresh request for a lock, by another instance. */
export interface Want extends WantContext {
  by: string;
}

/** Asks the holder of a lock to let go: the marker at `path`, written by `by`, now. */
export function writeWant(driver: QueueDriver, path: string, by: string, context: WantContext = {}): Promise<void> {
  const lines = (context.members ? `members ${context.members}\n` : "") + (context.force ? "force\n" : "");
  return writeWhole(driver, path, new TextEncoder().encode(`v-queue want ${Date.now()} ${by}\n${lines}`), false);
}

/** Someone other than `self`'s request for the lock, made within `WANT_FRESH_MS`. A missing or damaged marker asks nothing. */
export async function readWant(driver: QueueDriver, path: string, self: string): Promise<Want | undefined> {
  const bytes = await driver.readRecord(path).catch(() => undefined);
  const text = bytes ? new TextDecoder().decode(bytes) : "";
  const match = MARKER.exec(text);
  if (!match || match[2] === self || Date.now() - Number(match[1]) >= WANT_FRESH_MS) return undefined;
  const rest = text.slice(match[0].length);
  const members = Number(/^members (\d{1,6})$/m.exec(rest)?.[1] ?? 0);
  return { by: match[2]!, ...(members > 0 ? { members } : {}), ...(/^force$/m.test(rest) ? { force: true } : {}) };
}

/** Whether someone other than `self` asked for the lock within `WANT_FRESH_MS`. */
export async function isWanted(driver: QueueDriver, path: string, self: string): Promise<boolean> {
  return (await readWant(driver, path, self)) !== undefined;
}

/** Removes `by`'s marker (not another wanter's, who wrote over it). */
export async function withdrawWant(driver: QueueDriver, path: string, by: string): Promise<void> {
  const bytes = await driver.readRecord(path).catch(() => undefined);
  if (bytes && MARKER.exec(new TextDecoder().decode(bytes))?.[2] === by) await driver.remove(path).catch(() => {});
}

/** `open()`, or undefined when what it opens is locked by another holder that may be asked for it (`E_LOCKED`). */
export async function unlessLocked<T>(open: () => Promise<T>): Promise<T | undefined> {
  try {
    return await open();
  } catch (error) {
    if (VQueueError.isError(error) && error.code === "E_LOCKED" && !error.unaskable) return undefined;
    throw error;
  }
}

/**
 * Takes what a lock guards, by request when another instance holds it: `tryTake` at once, then
 * a marker at `wantPath` and `tryTake` again every `RETRY_MS` until it succeeds or
 * `timeoutMs` passes (`E_LOCKED`, naming `what`). The marker goes once taken or given up.
 */
export async function takeByRequest<T>(
  driver: QueueDriver,
  wantPath: string,
  by: string,
  tryTake: () => Promise<T | undefined>,
  timeoutMs: number,
  what: string,
  context: WantContext = {},
): Promise<T> {
  const first = await tryTake();
  if (first !== undefined) return first;
  const deadline = Date.now() + timeoutMs;
  let wrote = 0;
  try {
    for (;;) {
      if (Date.now() - wrote >= REFRESH_MS) {
        // Best effort: a marker not written is written again at the next refresh.
        await writeWant(driver, wantPath, by, context).catch(() => {});
        wrote = Date.now();
      }
      await sleep(RETRY_MS);
      const taken = await tryTake();
      if (taken !== undefined) return taken;
      if (Date.now() >= deadline) {
        throw new VQueueError(
          "E_LOCKED",
          `${what} is held by another instance, which did not hand it over within ${timeoutMs} ms (handoffTimeoutMs): it is busy or paused. Try again.`,
        );
      }
    }
  } finally {
    await withdrawWant(driver, wantPath, by);
  }
}
