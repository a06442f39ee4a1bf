import { defineDriver, type DriverLock, type LogFile, type QueueDriver, type RecordFile } from "../../src/core/driver";
import { checkOption, integer, optionError, showValue } from "../../src/core/check";
import { VQueueError } from "../../src/core/errors";
import type { DurableObjectNamespace } from "./utils/durable-object-types";
import { leaseLock } from "./utils/lease";
import type { Fence, VQueueObject, WriteStatus } from "./utils/queue-object";
import { queueOfPath } from "./utils/redis-keys";

export type { DurableObjectNamespace } from "./utils/durable-object-types";

const DRIVER_NAME = "durable-object";

/** What the driver calls on a stub: the RPC methods of `VQueueObject`. */
type QueueObjectStub = Pick<
  VQueueObject,
  | "open"
  | "size"
  | "read"
  | "readAll"
  | "append"
  | "truncate"
  | "replace"
  | "list"
  | "mkdir"
  | "remove"
  | "lock"
  | "renew"
  | "unlock"
  | "isLocked"
  | "setRegistered"
  | "register"
  | "unregister"
  | "queues"
>;

export interface DurableObjectDriverOptions {
  /** The namespace binding of the `VQueueObject` class (`env.VQUEUE` with the wrangler config of docs/runtimes.md#cloudflare-workers). */
  namespace: DurableObjectNamespace;
  /**
   * Namespace of the objects' names (`<prefix>:<queue>`, the registry `<prefix>/`), so that
   * several sets of queues can share one binding.
   * @default "vq"
   */
  prefix?: string;
  /**
   * How long a writer or consumer lock stays valid without being renewed (timed by the object).
   * The holder renews it every third of this while its isolate runs, and before a write once it
   * is stale; a lock whose holder is gone is free after at most this. workerd runs no timer of an
   * isolate between its requests, so an idle isolate's locks lapse after this: kept under the
   * hand-over wait (`handoffTimeoutMs`, 5 s), a partition an idle isolate held is taken within one.
   * @default 3000
   */
  lockLeaseMs?: number;
  /**
   * How often a consumer looks for messages another isolate wrote (one call to the queue's
   * object per look): pushes in the same isolate wake it at once. The long-poll budget of a
   * request in workerd (docs/runtimes.md#cloudflare-workers) counts these calls.
   * @default 1000
   */
  pollIntervalMs?: number;
  /**
   * Names the storage: driver instances with the same key in one isolate share wake-ups.
   * @default the prefix
   */
  key?: string;
}

/** The fences of this isolate's durable-object locks, by lock object: a lock may fence a write through another driver instance on the same namespace. */
const locks = new WeakMap<DriverLock, { fence: Fence; lose(): void }>();

const PREFIX_RE = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * Queues in Cloudflare Durable Objects, for the HTTP app and the engine in workerd: each queue
 * (each partition of a partitioned one) is one `VQueueObject`, the single owner of its files, so
 * every append, truncate and info-line replace is one atomic call that also checks the writer's
 * fence (its lock's epoch), as the redis driver's Lua scripts do. Locks are leases held in the
 * object's storage. A registry object lists the queues. See docs/runtimes.md#cloudflare-workers.
 *
 * @example
 * import durableObjectDriver from "v-queue/drivers/durable-object";
 * export { VQueueObject } from "v-queue/cloudflare"; // the class the wrangler config binds as VQUEUE
 * const driver = durableObjectDriver({ namespace: env.VQUEUE });
 */
const durableObjectDriver = defineDriver((options: DurableObjectDriverOptions): QueueDriver => {
  const namespace = options?.namespace;
  if (!namespace || typeof namespace.idFromName !== "function" || typeof namespace.get !== "function") {
    throw optionError(
      `Missing required option \`namespace\` of the ${DRIVER_NAME} driver: the Durable Object namespace binding of the VQueueObject class (e.g. env.VQUEUE), got ${showValue(namespace)}.`,
    );
  }
  const prefix = options.prefix ?? "vq";
  const leaseMs = options.lockLeaseMs ?? 3000;
  if (typeof prefix !== "string" || !PREFIX_RE.test(prefix))
    throw optionError(`Invalid prefix ${showValue(prefix)}: use 1 to 64 characters from A-Z a-z 0-9 . _ : -.`);
  checkOption("lockLeaseMs", leaseMs, integer(30));
  const pollIntervalMs = options.pollIntervalMs ?? 1000;
  checkOption("pollIntervalMs", pollIntervalMs, integer(10, 60_000));

  // A stub per call, not kept: a stub made while serving one request may not be usable from another in workerd.
  const objectOf = (queue: string) => namespace.get(namespace.idFromName(`${prefix}:${queue}`)) as QueueObjectStub;
  const registry = () => namespace.get(namespace.idFromName(`${prefix}/`)) as QueueObjectStub;
  const call = async <T>(run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      if (VQueueError.isError(error)) throw error;
      throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
  };
  const queueOf = (path: string) => {
    const queue = queueOfPath(path);
    if (!queue) throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver cannot store ${JSON.stringify(path)}: it belongs to no queue.`);
    return queue;
  };
  /** Lists the queue in the registry (its object said it is not yet), then tells the object so. */
  const register = async (queue: string, unregistered: boolean) => {
    if (!unregistered) return;
    await registry().register(queue);
    await objectOf(queue).setRegistered();
  };
  /** Drops a queue without files from the registry, then looks again: a file made meanwhile puts it back. */
  const forget = async (queue: string) => {
    await registry().unregister(queue);
    if ((await objectOf(queue).list("")).length > 0) await registry().register(queue);
  };
  const fenceOf = (path: string, lock: DriverLock | undefined) => {
    if (!lock) return undefined;
    const held = locks.get(lock);
    if (!held) throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver was given a fence that is not one of its locks (a lock of another driver?).`);
    if (queueOfPath(held.fence.path) !== queueOfPath(path))
      throw new VQueueError(
        "E_IO",
        `The ${DRIVER_NAME} driver cannot fence a write to ${JSON.stringify(path)} with the lock ${JSON.stringify(held.fence.path)} of another queue.`,
      );
    return held;
  };
  /** Runs a fenced write on the path's object and turns its status into the driver's errors. */
  const write = async (path: string, lock: DriverLock | undefined, run: (object: QueueObjectStub, fence: Fence | undefined) => Promise<WriteStatus>) => {
    const held = fenceOf(path, lock);
    const queue = queueOf(path);
    const status = await call(() => run(objectOf(queue), held?.fence));
    if (status.ok) return register(queue, status.unregistered);
    if (status.reason === "fenced") {
      held?.lose();
      throw new VQueueError(
        "E_FENCED",
        `The ${DRIVER_NAME} driver refused a write to ${JSON.stringify(path)}: its lock was taken over by a newer holder (epoch ${lock?.epoch} is stale). Nothing was written.`,
      );
    }
    if (status.reason === "not-at-end")
      throw new VQueueError(
        "E_IO",
        `The ${DRIVER_NAME} driver cannot append to ${JSON.stringify(path)} where the writer thinks it ends: the log ends at ${status.size}.`,
      );
    throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver cannot write ${JSON.stringify(path)}: it was removed.`);
  };
  const open = async (path: string, create: boolean) => {
    const queue = queueOf(path);
    const { exists, unregistered } = await call(() => objectOf(queue).open(path, create));
    await call(() => register(queue, unregistered));
    return exists;
  };
  const readAll = async (path: string) => (await call(() => objectOf(queueOf(path)).readAll(path))) ?? new Uint8Array(0);

  const log = (path: string): LogFile => ({
    size: async () => (await call(() => objectOf(queueOf(path)).size(path))) ?? 0,
    read: async (position, length) =>
      length <= 0 ? new Uint8Array(0) : ((await call(() => objectOf(queueOf(path)).read(path, position, length))) ?? new Uint8Array(0)),
    append: (at, data, fence) => write(path, fence, (object, f) => object.append(path, at, data, f)),
    truncate: (length, fence) => write(path, fence, (object, f) => object.truncate(path, length, f)),
    // A finished call is stored: the object's writes are confirmed before its reply (output gates).
    sync: async () => {},
    close: async () => {},
  });
  const record = (path: string): RecordFile => ({
    read: () => readAll(path),
    replace: (data, fence) => write(path, fence, (object, f) => object.replace(path, data, f)),
    sync: async () => {},
    close: async () => {},
  });

  return {
    name: DRIVER_NAME,
    storageKey: `${DRIVER_NAME}:${options.key ?? prefix}`,
    pollIntervalMs,
    openLog: async (path, { create }) => ((await open(path, create)) ? log(path) : undefined),
    openRecord: async (path, { create }) => ((await open(path, create)) ? record(path) : undefined),
    readRecord: (path) => call(() => objectOf(queueOf(path)).readAll(path)),
    writeAtomic: (path, data, { fence }) => write(path, fence, (object, f) => object.replace(path, data, f)),
    async list(dir) {
      if (dir !== "") return call(() => objectOf(queueOf(dir)).list(dir));
      const queues = await call(() => registry().queues());
      const listed = await Promise.all(queues.map(async (queue) => ({ queue, names: await call(() => objectOf(queue).list("")) })));
      const names = new Set<string>();
      for (const { queue, names: found } of listed) {
        if (found.length === 0) await call(() => forget(queue));
        for (const name of found) names.add(name);
      }
      return [...names];
    },
    async mkdir(dir) {
      if (!dir) return;
      const queue = queueOf(dir);
      const { unregistered } = await call(() => objectOf(queue).mkdir(dir));
      await call(() => register(queue, unregistered));
    },
    async remove(path, fence) {
      const queue = queueOfPath(path);
      if (!queue) return;
      const held = fenceOf(path, fence);
      const { empty, fenced } = await call(() => objectOf(queue).remove(path, held?.fence));
      if (fenced) {
        held?.lose();
        throw new VQueueError(
          "E_FENCED",
          `The ${DRIVER_NAME} driver refused to remove ${JSON.stringify(path)}: its lock was taken over by a newer holder (epoch ${fence?.epoch} is stale). Nothing was removed.`,
        );
      }
      if (empty) await call(() => forget(queue));
    },
    async lock(path) {
      const queue = queueOf(path);
      const since = Date.now();
      const epoch = await call(() => objectOf(queue).lock(path, leaseMs));
      if (epoch === 0) return undefined;
      const { lock, lose } = leaseLock({
        driver: DRIVER_NAME,
        key: path,
        leaseMs,
        since,
        epoch,
        // The object takes a lease that ran out back while nobody took it (queue-object.ts): false is a newer holder.
        renew: async () => ((await call(() => objectOf(queue).renew(path, epoch, leaseMs))) ? "renewed" : { takenBy: undefined }),
        free: () => call(() => objectOf(queue).unlock(path, epoch)),
      });
      locks.set(lock, { fence: { path, epoch }, lose });
      return lock;
    },
    isLocked: (path) => call(() => objectOf(queueOf(path)).isLocked(path)),
  };
});

export default durableObjectDriver;
