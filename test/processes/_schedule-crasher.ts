/**
 * A writer process that sets a schedule and dies (SIGKILL) at its first firing, after the firing
 * is in the queue and before its FIRED frame is written: the crash that the next writer's open
 * settles (test/processes/schedule-crash.test.ts). Prints "set" once the schedule is durable.
 */
import fsDriver from "../../adapters/drivers/fs";
import type { LogFile, QueueDriver } from "../../src/core/driver";
import { openQueue } from "../../src/writer/writer";

const [dir, everyMs] = process.argv.slice(2);
const base = fsDriver({ dir: dir! });
let appends = 0;
/** The schedules file's appends: the first is the schedule's UPSERT, the second its first FIRED frame (never written). */
const dieAtFired = (log: LogFile): LogFile => ({
  size: () => log.size(),
  read: (position, length) => log.read(position, length),
  append: async (at, data, fence) => {
    if (++appends === 2) process.kill(process.pid, "SIGKILL");
    return log.append(at, data, fence);
  },
  truncate: (length, fence) => log.truncate(length, fence),
  sync: () => log.sync(),
  close: () => log.close(),
});
const driver: QueueDriver = {
  ...base,
  openLog: async (path, options) => {
    const log = await base.openLog(path, options);
    return log && path.endsWith("_info_sched") ? dieAtFired(log) : log;
  },
};
const writer = await openQueue("q", { driver, onProblem: () => {} });
await writer.schedule("beat", { everyMs: Number(everyMs) });
console.log("set");
// A schedule's timer keeps no process alive (it waits on storage for the next writer): this one lives until it fires.
setInterval(() => {}, 1000);
