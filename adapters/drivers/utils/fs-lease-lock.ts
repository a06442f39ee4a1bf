import { randomBytes } from "node:crypto";
import { linkSync, lstatSync, readdirSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { link, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "pathe";
import type { DriverLock } from "../../../src/driver";
import { VQueueError } from "../../../src/errors";
import { leaseLock } from "./lease";
import { isCode, isOwnerAlive, myOwnerLine, readOwner } from "./pid-lock";

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

const MUTEX_SUFFIX = "~fence";
/** How long a takeover waits for a lock's write mutex before it says "held" (the caller retries). */
const TAKEOVER_WAIT_MS = 50;

interface FenceInfo {
  path: string;
  key: string;
  token: string;
  leaseMs: number;
  lose(): void;
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
    renew: async () => {
      if (readTextSync(path) !== held) return false;
      const now = new Date();
      utimesSync(path, now, now);
      return true;
    },
    free: async () => {
      await withMutex(path, leaseMs, () => {
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
    if (judged && !(await moveAside(path, judged.content))) return false;
    try {
      await link(temp, path);
      return true;
    } catch (error) {
      if (isCode(error, "EEXIST")) return false;
      throw error;
    }
  } finally {
    await rm(temp, { force: true });
  }
}

/** Removes the stale file at `path` if it still holds `content` (moved aside, then checked); false when it changed. */
async function moveAside(path: string, content: string): Promise<boolean> {
  const aside = `${path}~${process.pid}.${randomBytes(4).toString("hex")}.stale`;
  try {
    await rename(path, aside);
  } catch (error) {
    if (isCode(error, "ENOENT")) return true;
    throw error;
  }
  const moved = await readOwner(aside);
  // Another's fresh lock (a process without leases took it meanwhile): given back.
  if (moved !== content) await link(aside, path).catch(() => {});
  await rm(aside, { force: true });
  return moved === content;
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
  if (!info) throw new VQueueError("E_IO", "The fs driver was given a fence that is not one of its leased locks (a lock of another driver, or of an fs driver without lockLeaseMs?).");
  return withMutex(info.path, info.leaseMs, () => {
    if (readTextSync(info.path) !== info.token) {
      info.lose();
      throw new VQueueError("E_FENCED", `[fs] Refused a write of a stale holder: the lock ${JSON.stringify(info.key)} was taken over by another process (this one was paused or stalled past its lease of ${info.leaseMs} ms).`);
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

function epochOf(content: string | undefined): number {
  const epoch = Number(content?.trim().split(" ")[3]);
  return Number.isSafeInteger(epoch) && epoch > 0 ? epoch : 0;
}

function readTextSync(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

/** This process's turns at each mutex, one after another: the mutex file is per process, not per call. */
const turns = new Map<string, Promise<unknown>>();

/**
 * Runs `run` inside the write mutex of the lock at `path`: first in this process's turn, then
 * holding the mutex file. Waits at most `waitMs` for another process's mutex (`E_LOCKED`).
 */
function withMutex<T>(path: string, waitMs: number, run: () => Promise<T> | T): Promise<T> {
  const mutex = path + MUTEX_SUFFIX;
  const before = turns.get(mutex) ?? Promise.resolve();
  const result = before.then(async () => {
    await enterMutex(mutex, waitMs);
    try {
      return await run();
    } finally {
      leaveMutex(mutex);
    }
  });
  const after = result.catch(() => {});
  turns.set(mutex, after);
  void after.then(() => {
    if (turns.get(mutex) === after) turns.delete(mutex);
  });
  return result;
}

/** Never throws: the write inside landed or failed on its own, and says so. */
function leaveMutex(mutex: string): void {
  try {
    unlinkSync(mutex);
  } catch {
    // Left in place (a file system refusing the unlink), a live owner's mutex waits for this
    // process to end: nothing better can be done here.
  }
}

async function enterMutex(mutex: string, waitMs: number): Promise<void> {
  const me = await myOwnerLine();
  const deadline = Date.now() + waitMs;
  for (let delay = 1; ; delay = Math.min(delay * 2, 16)) {
    // A link to this process's owner file: the mutex appears with its owner in it, in one step.
    const owner = ownerFileBeside(mutex, me);
    try {
      linkSync(owner, mutex);
      return;
    } catch (error) {
      // The owner file was removed under us: made again at the next turn.
      if (isCode(error, "ENOENT")) ownerFiles.delete(dirname(mutex));
      else if (!isCode(error, "EEXIST")) throw error;
    }
    if (await breakIfStale(mutex, owner)) continue;
    if (Date.now() >= deadline) {
      throw new VQueueError("E_LOCKED", `[fs] The write mutex ${mutex} is held by ${(await readOwner(mutex))?.trim() || "a process"} that does not let go (paused?) after ${waitMs} ms.`);
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

/** This process's owner files (`.vq-owner~<pid>~<hex>`, holding its owner line), by directory. */
const ownerFiles = new Map<string, string>();
let exitHooked = false;

/**
 * This process's owner file in the mutex's directory (made once; removed when the process
 * exits, and by the next process to make one there if it was killed).
 */
function ownerFileBeside(mutex: string, me: string): string {
  const dir = dirname(mutex);
  let file = ownerFiles.get(dir);
  if (file) return file;
  removeDeadOwnerFiles(dir);
  file = join(dir, `${OWNER_FILE_PREFIX}${process.pid}~${randomBytes(4).toString("hex")}`);
  writeFileSync(file, me);
  if (!exitHooked) {
    exitHooked = true;
    process.once("exit", () => ownerFiles.forEach((path) => rmSync(path, { force: true })));
  }
  ownerFiles.set(dir, file);
  return file;
}

const OWNER_FILE_PREFIX = ".vq-owner~";

/** Owner files of processes on this host that are gone (SIGKILL skips the exit hook). */
function removeDeadOwnerFiles(dir: string): void {
  for (const name of readdirSync(dir)) {
    const pid = Number(name.slice(OWNER_FILE_PREFIX.length).split("~")[0]);
    if (!name.startsWith(OWNER_FILE_PREFIX) || !Number.isSafeInteger(pid) || pid <= 0 || isPidAlive(pid)) continue;
    rmSync(join(dir, name), { force: true });
  }
}

function isPidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return !isCode(error, "ESRCH");
  }
}

/**
 * Removes a mutex left by a dead process (or by this module earlier: its turns never overlap,
 * so a mutex linked to its own owner file is a leftover); true when it is gone. Breakers take
 * turns through a second mutex (`~break`, the same kind): inside it the judged mutex can only be
 * the same file still (its owner is dead, and no other breaker runs), so it is unlinked, never
 * moved and put back.
 */
async function breakIfStale(mutex: string, owner: string): Promise<boolean> {
  const judged = await judgeMutex(mutex, owner);
  if (judged !== "stale") return judged === "gone";
  const breaker = mutex + BREAK_SUFFIX;
  try {
    linkSync(owner, breaker);
  } catch (error) {
    if (!isCode(error, "EEXIST")) throw error;
    // Another breaker: done soon, unless it died inside (then its file goes, and we try again).
    if ((await judgeMutex(breaker, owner)) === "stale") rmSync(breaker, { force: true });
    return false;
  }
  try {
    if ((await judgeMutex(mutex, owner)) === "stale") rmSync(mutex, { force: true });
    return true;
  } finally {
    rmSync(breaker, { force: true });
  }
}

const BREAK_SUFFIX = "~break";

/** A mutex file's state: absent, held by a live owner, or stale (its owner is dead, or it is this module's own leftover). */
async function judgeMutex(mutex: string, owner: string): Promise<"gone" | "held" | "stale"> {
  let content: string | undefined;
  let ino: number;
  try {
    ino = lstatSync(mutex).ino;
    content = readTextSync(mutex);
  } catch (error) {
    if (isCode(error, "ENOENT")) return "gone";
    throw error;
  }
  if (content === undefined) return "gone";
  if (ino === lstatSync(owner, { throwIfNoEntry: false })?.ino) return "stale";
  return (await isOwnerAlive(content, mutex)) ? "held" : "stale";
}
