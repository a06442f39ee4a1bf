import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { consumerLockPath, consumerOfLockFile, consumerOfPopFile, writerLockPath } from "../storage/paths";

/**
 * The locks an admin call (purge, delete) holds so that no writer or consumer uses the queue
 * meanwhile, in this process or another. Every lock is tried, never waited for: two admins
 * and a writer opening at once cannot deadlock, one of them is refused. The order is fixed
 * all the same (the writer's lock, then the consumers' by name), so that of two admins racing
 * the one that gets the writer's lock is the one that can get the rest.
 */
export interface HeldQueue {
  /** The consumers locked: every one with a saved position or a lock file. */
  consumers: string[];
  /** The locks held, by path (`writerLockPath`, `consumerLockPath`): the fences of the admin's writes. */
  locks: Map<string, DriverLock>;
  /** Releases every lock (which removes the lock files). */
  release(): Promise<void>;
}

/** How many times the consumers are listed again for ones created while the locks were taken. */
const RELIST_ROUNDS = 5;

/** The consumers of `queue` that have a file, a saved position or a lock, by name (core/names.ts: never another queue's). */
export async function consumerNames(driver: QueueDriver, queue: string): Promise<string[]> {
  const names = new Set<string>();
  for (const entry of await driver.list("")) {
    const name = consumerOfPopFile(queue, entry) ?? consumerOfLockFile(queue, entry);
    if (name !== undefined) names.add(name);
  }
  return [...names].sort();
}

/**
 * Takes the writer's lock of `queue` and every consumer's, or none: when one is held,
 * everything taken is released and `E_LOCKED` names every holder found. `doing` is the
 * operation, for the message ("purge").
 */
export async function lockWholeQueue(driver: QueueDriver, queue: string, doing: string): Promise<HeldQueue> {
  const held = new Map<string, DriverLock>();
  const busy: string[] = [];
  const release = async () => {
    const locks = [...held.values()].reverse();
    held.clear();
    for (const lock of locks) await lock.release().catch(() => {});
  };
  const take = async (path: string, who: string) => {
    const lock = await driver.lock(path);
    if (lock) held.set(path, lock);
    else busy.push(who);
  };
  try {
    await take(writerLockPath(queue), "its writer");
    const locked = new Set<string>();
    // A consumer created while these are taken is locked too: list again until none is new.
    // Every consumer is tried even once one is refused: the error names every holder.
    for (let round = 0; round < RELIST_ROUNDS; round++) {
      const fresh = (await consumerNames(driver, queue)).filter((name) => !locked.has(name));
      if (fresh.length === 0) break;
      for (const name of fresh) {
        locked.add(name);
        await take(consumerLockPath(queue, name), `consumer "${name}"`);
      }
      if (busy.length > 0) break;
    }
    if (busy.length > 0) {
      const who = busy.length === 1 ? `${busy[0]} is` : `${busy.slice(0, -1).join(", ")} and ${busy.at(-1)} are`;
      throw new VQueueError(
        "E_LOCKED",
        `Cannot ${doing} queue "${queue}": ${who} open (in this or another process). Close ${busy.length === 1 ? "it" : "them"} first.`,
      );
    }
    return { consumers: [...locked].sort(), locks: held, release };
  } catch (error) {
    await release();
    throw error;
  }
}

/** Takes one consumer's lock, or throws `E_LOCKED` (`doing`: "delete"). */
export async function lockConsumer(driver: QueueDriver, queue: string, consumer: string, doing: string): Promise<DriverLock> {
  const lock = await driver.lock(consumerLockPath(queue, consumer));
  if (!lock)
    throw new VQueueError("E_LOCKED", `Cannot ${doing} consumer "${consumer}" of queue "${queue}": it is open (in this or another process). Close it first.`);
  return lock;
}
