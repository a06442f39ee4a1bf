// A memory store behind a driver whose writes fail from a chosen step on: a storage failing
// mid-way (a Redis failover) or a kill, where a real fault cannot be placed at that step.
import memoryDriver from "../../adapters/drivers/memory";
import type { LogFile, QueueDriver } from "../../src/core/driver";
import { VQueueError } from "../../src/core/errors";

export const injected = (): VQueueError => new VQueueError("E_IO", "the storage is down (injected)");

export type Step = "truncate" | "append" | "remove";

/**
 * The memory store `name` through a driver whose writes fail from the one `failAt` picks on:
 * `tear` writes the first half of that append before failing (a write cut short). Not `sticky`:
 * only the writes `failAt` picks fail (one file's storage failing, the others' going on).
 */
export function faulty(name: string, failAt: (step: Step, path: string) => boolean, tear = false, sticky = true): QueueDriver {
  const inner = memoryDriver({ name });
  let failing = false;
  const fails = (step: Step, path: string) => (sticky ? (failing ||= failAt(step, path)) : failAt(step, path));
  const wrap = (path: string, log: LogFile): LogFile => ({
    ...log,
    size: () => log.size(),
    read: (at, length) => log.read(at, length),
    sync: () => log.sync(),
    close: () => log.close(),
    async truncate(length, fence) {
      if (fails("truncate", path)) throw injected();
      return log.truncate(length, fence);
    },
    async append(at, data, fence) {
      if (!fails("append", path)) return log.append(at, data, fence);
      if (tear) await log.append(at, data.subarray(0, data.length >> 1), fence);
      throw injected();
    },
  });
  return {
    ...inner,
    async openLog(path, options) {
      const log = await inner.openLog(path, options);
      return log && wrap(path, log);
    },
    async remove(path) {
      if (fails("remove", path)) throw injected();
      return inner.remove(path);
    },
  };
}
