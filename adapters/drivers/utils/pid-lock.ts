import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { link, lstat, readFile, unlink, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { VQueueError } from "../../../src/core/errors";
import { sleep } from "../../../src/core/sleep";
import { isProcessAlive, processStart } from "./process-probe";

/**
 * An exclusive lock that dies with its process, without native code: the lock file holds
 * the owner's pid, start time and host, and is created atomically (write a temp file, then
 * `link` it into place, which fails if the name exists). A lock whose owner is gone (kill -9
 * included, or a pid reused by another process) is stale and is taken over.
 *
 * Taking over never moves nor removes a live lock: the stale file is removed under a breaker
 * file named after its dead owner (`removeStale`). Moving it aside first, then giving back a
 * live one found moved, put back a lock its owner had released meanwhile (its release found no
 * file): held by a live process, nobody's, for good (a server's own consumer, E_LOCKED on every lease).
 *
 * Limits: the check needs the owner on this host (a lock from another host of a shared
 * filesystem is treated as held).
 */
export interface PidLock {
  release(): Promise<void>;
}

const HOST = hostname();
/** Breakers of breakers, each left by a process that died while removing a stale lock: beyond this many, the lock is taken as held. */
const MAX_BREAKER_DEPTH = 4;
/** Another process is removing the stale lock (for a few file operations): looked at again after this many ms. */
const BREAKER_WAIT_MS = 2;

/** This process's owner line: its pid and start time do not change while it runs. */
let myLine: Promise<string> | undefined;

export async function acquirePidLock(path: string): Promise<PidLock | undefined> {
  // Held by a live process, as it is whenever instances take turns on a partition: said after
  // one read, instead of a temporary file written, linked in vain and removed.
  const current = await readOwner(path);
  if (current !== undefined && (await isOwnerAlive(current, path))) return undefined;
  // Names with a `~`: the fs driver does not list them (they would read as files of a consumer named `c.lock.<pid>...`).
  const tmp = `${path}~${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  await writeFile(tmp, await myOwnerLine());
  try {
    // The file's identity, for the release: the link below names the same inode.
    const { dev, ino } = await lstat(tmp);
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await linkIfAbsent(tmp, path)) return { release: () => releasePidLock(path, dev, ino) };
      const held = await readOwner(path);
      if (held === undefined) continue; // released meanwhile: try again
      if (await isOwnerAlive(held, path)) return undefined;
      await removeStale(path, held, tmp, 0);
    }
    return undefined;
  } finally {
    await unlink(tmp).catch(() => {});
  }
}

/**
 * Removes the lock file at `path` if it still holds `held`, the line of a dead owner. One
 * process at a time does so, the one whose link of `tmp` (its own owner line) made the breaker
 * `<path>~<held's hash>.break`: nobody else removes that file (its owner is dead, other takers'
 * links fail while it exists), so it is still there when it is removed. A breaker left by a
 * process that died on the way is stale in turn: removed the same way, one level down.
 */
async function removeStale(path: string, held: string, tmp: string, depth: number): Promise<void> {
  if (depth > MAX_BREAKER_DEPTH) return;
  const breaker = breakerPath(path, held);
  if (!(await linkIfAbsent(tmp, breaker))) {
    const other = await readOwner(breaker);
    if (other === undefined) return; // done meanwhile
    if (await isOwnerAlive(other, breaker)) await sleep(BREAKER_WAIT_MS);
    else await removeStale(breaker, other, tmp, depth + 1);
    return;
  }
  try {
    if ((await readOwner(path)) === held) await unlink(path).catch(ignoreCode("ENOENT"));
  } finally {
    await unlink(breaker).catch(() => {});
  }
}

/** The breaker of the stale lock file at `path` holding `held` (see `removeStale`). */
export function breakerPath(path: string, held: string): string {
  return `${path}~${createHash("sha256").update(held).digest("hex").slice(0, 16)}.break`;
}

/** Links `target` at `path`; false when `path` exists (the atomic create of a lock file). */
export async function linkIfAbsent(target: string, path: string): Promise<boolean> {
  try {
    await link(target, path);
    return true;
  } catch (error) {
    if (isCode(error, "EEXIST")) return false;
    throw error;
  }
}

function ignoreCode(code: string): (error: unknown) => void {
  return (error) => {
    if (!isCode(error, code)) throw error;
  };
}

/**
 * Whether a live process holds the lock at `path` (a stale or empty lock file is not held).
 * `inline`: its line read with a synchronous call (a look at a thousand queues asks this of
 * each; through the pool that is an open, a read and a close each).
 */
export async function isPidLockHeld(path: string, inline = false): Promise<boolean> {
  const owner = await readOwner(path, inline);
  return owner !== undefined && (await isOwnerAlive(owner, path));
}

/**
 * Removes the lock file if it is still ours: the same inode, checked with lstat, which needs
 * no file descriptor. (Reading the file did: a process out of them (EMFILE) failed to release
 * and held the lock, while alive, for good.)
 */
async function releasePidLock(path: string, dev: number, ino: number): Promise<void> {
  let stat;
  try {
    stat = await lstat(path);
  } catch (error) {
    if (isCode(error, "ENOENT")) return;
    throw error;
  }
  if (stat.dev === dev && stat.ino === ino) await unlink(path).catch(() => {});
}

/** The owner line of the lock file at `path` (undefined: no such file); `inline`: read with a synchronous call. */
export async function readOwner(path: string, inline = false): Promise<string | undefined> {
  try {
    return inline ? readFileSync(path, "utf8") : await readFile(path, "utf8");
  } catch (error) {
    if (isCode(error, "ENOENT")) return undefined;
    throw error;
  }
}

/** This process's owner line (`pid start host`, newline-ended), read once. */
export function myOwnerLine(): Promise<string> {
  return (myLine ??= ownerLine(process.pid));
}

async function ownerLine(pid: number): Promise<string> {
  return `${pid} ${processStart(pid) ?? "-"} ${HOST}\n`;
}

/** An empty or unreadable owner (the crate leaves empty lock files behind) is not alive. */
export async function isOwnerAlive(owner: string, path: string): Promise<boolean> {
  const [pidText, start, host] = owner.trim().split(" ");
  const pid = Number(pidText);
  if (!Number.isSafeInteger(pid) || pid <= 0 || !host) return false;
  if (host !== HOST) return true; // cannot tell from here
  try {
    if (!isProcessAlive(pid)) return false;
  } catch (error) {
    // This runtime may not probe processes (Deno without --allow-run): taking the lock as held
    // would leave a crashed writer's lock in place for good, with a misleading "already has a writer".
    const why = error instanceof Error ? error.message : String(error);
    throw new VQueueError(
      "E_LOCKED",
      `Cannot tell whether process ${pid}, named in the lock file ${path}, is still alive: ${why}. The check sends it signal 0 (on Deno: allow it with --allow-run).`,
      { cause: error, unaskable: true },
    );
  }
  // Alive, unless the pid now belongs to a younger process.
  const now = processStart(pid);
  return start === "-" || now === undefined || now === start;
}

export function isCode(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException)?.code === code;
}
