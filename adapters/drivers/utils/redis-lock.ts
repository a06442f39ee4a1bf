import type { DriverLock } from "../../../src/core/driver";
import { VQueueError } from "../../../src/core/errors";
import type { RedisCalls } from "./redis-client";
import { leaseLock, type Loss, type Renewal } from "./lease";
import { DRIVER_NAME, type QueueKeys } from "./redis-keys";

/** What a fenced write needs of a lock: its key, its token, and how to mark it lost. */
export interface FenceInfo {
  key: string;
  token: string;
  lose(found?: Loss): void;
}

/** The fences of this process's redis locks, by lock object (a fence is the very lock returned). */
const fences = new WeakMap<DriverLock, FenceInfo>();

/** The key and token of `fence` for a write's script, or the file key and "" without a fence. */
export function fenceArgs(fence: DriverLock | undefined, keys: QueueKeys, fileKey: string): { key: string; token: string; info?: FenceInfo } {
  if (!fence) return { key: fileKey, token: "" };
  const info = fences.get(fence);
  if (!info) throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver was given a fence that is not one of its locks (a lock of another driver?).`);
  // One slot per script: a lock of another queue cannot fence this file (never done by the engine).
  if (!info.key.startsWith(keys.lock("")))
    throw new VQueueError(
      "E_IO",
      `The ${DRIVER_NAME} driver cannot fence a write to ${JSON.stringify(fileKey)} with the lock ${JSON.stringify(info.key)} of another queue.`,
    );
  return { key: info.key, token: info.token, info };
}

/**
 * Takes the lock at `path`: a key holding `<owner> <epoch>` with a PX lease, set only if absent
 * (Lua), the epoch from the queue's INCR counter; renewed by Lua only while still ours
 * (lease.ts). Leases are timed by the Redis server, not by the hosts' clocks.
 */
export async function acquireRedisLock(calls: RedisCalls, keys: QueueKeys, path: string, leaseMs: number): Promise<DriverLock | undefined> {
  const key = keys.lock(path);
  const owner = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;
  const sentAt = Date.now();
  // No WAIT here: a lock key a failover loses leaves its holder fenced (GET gives nil), never two
  // holders writing; and a WAIT that failed would leave the lock taken until its lease ran out.
  const epoch = Number(await calls.run("vqLock", key, keys.epoch, keys.files, owner, leaseMs, path));
  if (epoch === 0) return undefined;
  const token = `${owner} ${epoch}`;
  const { lock, lose } = leaseLock({
    driver: DRIVER_NAME,
    key,
    leaseMs,
    since: sentAt,
    epoch,
    renew: async () => renewal(await calls.run("vqRefresh", key, token, leaseMs)),
    free: async () => void (await calls.run("vqUnlock", key, keys.files, token, path)),
  });
  fences.set(lock, { key, token, lose });
  return lock;
}

/** A `vqRefresh` answer: 1 (renewed), 0 (the key is gone), or the other holder's `<owner> <epoch>`. */
function renewal(answer: unknown): Renewal {
  if (typeof answer === "number") return answer === 1 ? "renewed" : "expired";
  const epoch = Number(String(answer).split(" ").at(-1));
  return { takenBy: Number.isSafeInteger(epoch) ? epoch : undefined };
}
