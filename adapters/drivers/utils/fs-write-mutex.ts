import { randomBytes } from "node:crypto";
import { linkSync, lstatSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "pathe";
import { VQueueError } from "../../../src/core/errors";
import { isCode, isOwnerAlive, myOwnerLine, readOwner } from "./pid-lock";
import { isProcessAlive } from "./process-probe";

/**
 * The write mutex of a leased fs lock (fs-lease-lock.ts): the file `<lock>~fence`, a hard link,
 * made only if absent, to the process's `.vq-owner~<pid>~<hex>` file beside it, so that it names
 * its owner from the start. One holder at a time over every process of the host; in a process,
 * callers take turns. A mutex whose owner is dead is cleared by the next to want it.
 */

const MUTEX_SUFFIX = "~fence";

/** A small file's text, or undefined when it is not there (synchronous: used inside the mutex and by renewals). */
export function readTextSync(path: string): string | undefined {
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
export function withMutex<T>(path: string, waitMs: number, run: () => Promise<T> | T): Promise<T> {
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
      throw new VQueueError(
        "E_LOCKED",
        `[fs] The write mutex ${mutex} is held by ${(await readOwner(mutex))?.trim() || "a process"} that does not let go (paused?) after ${waitMs} ms.`,
      );
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
  removeDeadLeftovers(dir);
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

/**
 * Leftovers of processes on this host that are gone (SIGKILL skips the exit hook and cuts work
 * short): owner files, what a fenced remove moved aside but did not delete yet
 * (`~removed-<pid>-<time>`, fs.ts) and a takeover's `~<pid>.<hex>.tmp` / `.stale` files.
 */
function removeDeadLeftovers(dir: string): void {
  for (const name of readdirSync(dir)) {
    const leftover = LEFTOVER.exec(name);
    const pid = Number(name.startsWith(OWNER_FILE_PREFIX) ? name.slice(OWNER_FILE_PREFIX.length).split("~")[0] : (leftover?.[1] ?? leftover?.[2]));
    if (!Number.isSafeInteger(pid) || pid <= 0 || isPidAlive(pid)) continue;
    rmSync(join(dir, name), { recursive: true, force: true });
  }
}

const LEFTOVER = /~(?:removed-(\d+)-[\da-z]+|(\d+)\.[\da-f]{8}\.(?:tmp|stale))$/;

/** A process this runtime may not probe (Deno without --allow-run) counts as alive: its leftovers stay. */
function isPidAlive(pid: number): boolean {
  try {
    return isProcessAlive(pid);
  } catch {
    return true;
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
