import { randomBytes } from "node:crypto";
import { unlinkSync, utimesSync } from "node:fs";
import { link, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import type { DriverLock } from "../../../src/core/driver";
import { VQueueError } from "../../../src/core/errors";
import { readTextSync, withMutex } from "./fs-write-mutex";
import { leaseLock, lockNowHeld, type Loss } from "./lease";
import { isCode, isOwnerAlive, linkIfAbsent, myOwnerLine } from "./pid-lock";

/**
 * The fs driver's leased locks (its `lockLeaseMs` option): a pid lock (pid-lock.ts) that also
 * runs out, so that the other processes of one host take over from a holder that is alive but
 * not running (SIGSTOP, a frozen container), and the paused holder is fenced when it resumes.
 *
 * The lock file holds `pid start host epoch nonce`; its holder touches it (the mtime) every third
 * of the lease (lease.ts). A lock whose process is gone is taken at once, as a pid lock is; one
 * whose process lives but has not touched it for a lease is taken too, with a higher epoch.
 * Every write a holder makes with the lock as `fence` first enters the lock's write mutex (the
 * file `<lock>~fence`: a hard link, made only if absent, to the process's `.vq-owner~<pid>~<hex>`
 * file beside it, so that it names its owner from the start), reads the lock file, and
 * writes only while it is still its own; a takeover replaces the lock file inside the same
 * mutex. So a write and a takeover never interleave: a write checked before the takeover landed
 * before it, and one after is refused (`E_FENCED`). A holder paused inside the mutex (a few
 * system calls) delays a takeover until it runs again, never more. One host only, as pid locks:
 * a lock of another host's process is held for good. A live holder's lock file of a process that
 * runs without leases (no epoch in it) never runs out either: that process would not be fenced.
 */

/** How long a takeover waits for a lock's write mutex before it says "held" (the caller retries). */
const TAKEOVER_WAIT_MS = 50;
/** How long a release waits for the write mutex before it leaves the lock file to run out. */
const FREE_WAIT_MS = 5000;

interface FenceInfo {
  path: string;
  key: string;
  token: string;
  leaseMs: number;
  lose(found?: Loss): void;
}

/** The fences of this process's leased fs locks, by lock object (a fence is the very lock returned). */
const fences = new WeakMap<DriverLock, FenceInfo>();

/** Takes the leased lock at `path` (absolute; `key` names it in messages), or undefined while another holds it. */
export async function acquireFsLeaseLock(path: string, key: string, leaseMs: number): Promise<DriverLock | undefined> {
  const since = Date.now();
  const found = await readLockFile(path);
  // Held, as it is whenever instances take turns: said after one read, without the mutex.
  if (found && (await isLive(found, path, leaseMs))) return undefined;
  const me = (await myOwnerLine()).trim();
  let token: string | undefined;
  let epoch = 0;
  try {
    await withMutex(path, TAKEOVER_WAIT_MS, async () => {
      const current = await readLockFile(path);
      if (current && (await isLive(current, path, leaseMs))) return;
      epoch = Math.max(Date.now(), epochOf(current?.content) + 1);
      const candidate = `${me} ${epoch} ${randomBytes(6).toString("hex")}\n`;
      if (await putInPlace(path, current, candidate)) token = candidate;
    });
  } catch (error) {
    if (VQueueError.isError(error) && error.code === "E_LOCKED") return undefined; // the mutex is busy: held
    throw error;
  }
  if (token === undefined) return undefined;
  const held = token;
  const { lock, lose } = leaseLock({
    driver: "fs",
    key,
    leaseMs,
    since,
    epoch,
    // Synchronous: two tiny calls on the calling thread, not queued in the thread pool behind
    // fsyncs (a renewal late by a lease loses the lock although the holder runs).
    // Stale but still ours (nobody took it): renewed, as no other holder can have written meanwhile.
    renew: async () => {
      const before = readTextSync(path);
      if (before !== held) return lostTo(before);
      const now = new Date();
      utimesSync(path, now, now);
      // Still ours after the touch: a takeover that judged the lock expired just before it may
      // have replaced the file in between (the touch then went to the successor's file).
      const after = readTextSync(path);
      return after === held ? "renewed" : lostTo(after);
    },
    free: async () => {
      // A short wait: a process that ends should not hang behind a paused one's mutex.
      await withMutex(path, Math.min(leaseMs, FREE_WAIT_MS), () => {
        if (readTextSync(path) === held) unlinkSync(path);
      }).catch(() => {}); // left in place, it runs out
    },
  });
  fences.set(lock, { path, key, token: held, leaseMs, lose });
  return lock;
}

/**
 * Puts the lock file `candidate` at `path` where `judged` (undefined: no file) was, or does
 * nothing (false) when another got there first. Made only if absent (`link`), never renamed
 * over: a process on the directory without leases takes free locks without this mutex.
 */
async function putInPlace(path: string, judged: LockFile | undefined, candidate: string): Promise<boolean> {
  const temp = `${path}~${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    await writeFile(temp, candidate);
    if (judged && !(await moveAside(path, judged))) return false;
    return await linkIfAbsent(temp, path);
  } finally {
    await rm(temp, { force: true });
  }
}

/**
 * Removes the stale file at `path` if it is still the one judged (moved aside, then checked:
 * the same content, not touched since); false when it changed. A holder that ran again and
 * renewed its lock just before the move keeps it.
 */
async function moveAside(path: string, judged: LockFile): Promise<boolean> {
  const aside = `${path}~${process.pid}.${randomBytes(4).toString("hex")}.stale`;
  try {
    await rename(path, aside);
  } catch (error) {
    if (isCode(error, "ENOENT")) return true;
    throw error;
  }
  const moved = await readLockFile(aside);
  const same = moved?.content === judged.content && moved.mtimeMs === judged.mtimeMs;
  // Another's fresh lock (a process without leases took it meanwhile), or renewed: given back.
  if (!same) await link(aside, path).catch(() => {});
  await rm(aside, { force: true });
  return same;
}

/** Whether a live, unexpired holder has the leased lock at `path`. */
export async function isFsLeaseLockHeld(path: string, leaseMs: number): Promise<boolean> {
  const found = await readLockFile(path);
  return found !== undefined && (await isLive(found, path, leaseMs));
}

/**
 * Runs `write` only while `fence` (a lock of `acquireFsLeaseLock`) is still its holder's, inside
 * the lock's write mutex; refused with `E_FENCED`, and the lock marked lost, once it was taken over.
 */
export async function fencedFsWrite<T>(fence: DriverLock, write: () => Promise<T>): Promise<T> {
  const info = fences.get(fence);
  if (!info)
    throw new VQueueError(
      "E_IO",
      "The fs driver was given a fence that is not one of its leased locks (a lock of another driver, or of an fs driver without lockLeaseMs?).",
    );
  return withMutex(info.path, info.leaseMs, () => {
    const content = readTextSync(info.path);
    if (content !== info.token) {
      const found = lostTo(content);
      info.lose(found);
      throw new VQueueError(
        "E_FENCED",
        `[fs] Refused a write of a stale holder: the lock ${JSON.stringify(info.key)} ${lockNowHeld(found)} (this process was paused or stalled past its lease of ${info.leaseMs} ms).`,
      );
    }
    return write();
  });
}

// --- Internal helpers ---

interface LockFile {
  content: string;
  mtimeMs: number;
}

async function readLockFile(path: string): Promise<LockFile | undefined> {
  try {
    const [content, { mtimeMs }] = await Promise.all([readFile(path, "utf8"), stat(path)]);
    return { content, mtimeMs };
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

/** Held: its process lives, and it was touched within the lease (or it has no lease: a process without them). */
async function isLive(file: LockFile, path: string, leaseMs: number): Promise<boolean> {
  if (!(await isOwnerAlive(file.content, path))) return false;
  if (file.content.trim().split(" ").length < 5) return true;
  return Date.now() - file.mtimeMs <= leaseMs;
}

/** What a renewal or a fenced write that found the lock file's `content` not ours found: none (its lease ran out and it was freed), or another holder's. */
function lostTo(content: string | undefined): Loss {
  return content === undefined ? "expired" : { takenBy: epochOf(content) || undefined };
}

function epochOf(content: string | undefined): number {
  const epoch = Number(content?.trim().split(" ")[3]);
  return Number.isSafeInteger(epoch) && epoch > 0 ? epoch : 0;
}
