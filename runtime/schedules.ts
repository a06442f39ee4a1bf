/**
 * A server's schedules (src/writer/schedules.ts): set and removed through the queue's one writer
 * (a partitioned queue's partition 0's, src/writer/partitioned.ts), taken as a produce takes it,
 * listed from storage by any instance. And it keeps the writer of every queue with schedules (src/writer/schedules.ts) held by some instance,
 * even when nobody produces to it: only the holder of a queue's writer fires its schedules. Every
 * `KEEP_MS` each instance takes the writers of those queues that no instance holds (their holder
 * died, or was paused past its lease: the same lock and hand-over a produce uses, writer-pool.ts),
 * so one of them fires again within a few seconds. The queues with schedules are found on storage
 * (`Q_info_sched`), every `SCAN_MS`, so that those set through another instance are kept too.
 */
import type { QueueDriver } from "../src/core/driver";
import { partitionName } from "../src/partitions/declaration";
import { queueOfSchedulesFile } from "../src/storage/paths";
import { readSchedules, type Schedule, type ScheduleInput } from "../src/writer/schedules";
import type { PartitionedWriters } from "./partitioned-writers";
import type { WriterPool } from "./writer-pool";

/** How often an instance looks for schedules' writers held by nobody. */
export const KEEP_MS = 1000;
/** How often the storage is listed for queues with schedules. */
const SCAN_MS = 5000;

/** What the schedules need of the registry. */
export interface SchedulesHost {
  writers: WriterPool;
  partitionedWriters: PartitionedWriters;
  driver(): Promise<QueueDriver>;
  /** The queue's partition count; undefined for an ordinary queue (or none yet). */
  partitions(queue: string): Promise<number | undefined>;
  onError(error: unknown): void;
}

export class ServerSchedules {
  readonly #host: SchedulesHost;
  /** Queues with schedules (as last read from storage, or set here since). */
  readonly #queues = new Set<string>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #scannedAt = 0;
  #round: Promise<void> | undefined;
  /** `start` was called: keep the schedules' writers held (from the first request on, where timers wait for one). */
  #wanted = false;
  #closed = false;

  constructor(host: SchedulesHost) {
    this.#host = host;
  }

  /** Sets schedule `name` of `queue` (created, or updated in place); the queue is created if missing. */
  async set(queue: string, name: string, input: ScheduleInput): Promise<{ schedule: Schedule; created: boolean }> {
    const set = (await this.#partitioned(queue))
      ? await this.#host.partitionedWriters.schedule(queue, name, input)
      : await this.#host.writers.schedule(queue, name, input);
    this.#queues.add(queue);
    return set;
  }

  /** Removes schedule `name` of `queue`: false when there was none. */
  async remove(queue: string, name: string): Promise<boolean> {
    // None on storage: nothing to take the writer for (nor a queue to make).
    if (!(await this.list(queue)).some((s) => s.name === name)) return false;
    return (await this.#partitioned(queue)) ? this.#host.partitionedWriters.unschedule(queue, name) : this.#host.writers.unschedule(queue, name);
  }

  /** The schedules of `queue`, as storage has them (whichever instance holds its writer). */
  async list(queue: string): Promise<Schedule[]> {
    return readSchedules(await this.#host.driver(), (await this.#partitioned(queue)) ? partitionName(queue, 0) : queue);
  }

  async #partitioned(queue: string): Promise<boolean> {
    return (await this.#host.partitions(queue)) !== undefined;
  }

  /** The queue whose schedules file this is: a partitioned queue's for its partition 0's. */
  async #queueOf(fileName: string): Promise<string | undefined> {
    const queue = queueOfSchedulesFile(fileName);
    const base = queue?.endsWith(".p0") ? queue.slice(0, -3) : undefined;
    return base !== undefined && (await this.#partitioned(base)) ? base : queue;
  }

  /**
   * Starts keeping (a host's `ready`), with a first round now. Where a timer is refused (workerd
   * makes an app at global scope: "Disallowed operation called within global scope"), the first
   * request starts it instead (`wake`).
   */
  start(): Promise<void> {
    this.#wanted = true;
    try {
      this.#startTimer();
    } catch {
      return Promise.resolve();
    }
    return this.#run();
  }

  /** At each request: starts keeping if `start` was asked for and could not start its timer then. */
  wake(): void {
    if (!this.#wanted || this.#timer || this.#closed) return;
    try {
      this.#startTimer();
    } catch {
      return; // not yet: the next request tries again
    }
    void this.#run();
  }

  #startTimer(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => void this.#run(), KEEP_MS);
    (this.#timer as { unref?: () => void }).unref?.();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#round;
  }

  /** One round at a time: a slow storage does not pile them up. */
  #run(): Promise<void> {
    this.#round ??= this.#keep()
      .catch((error: unknown) => this.#host.onError(error))
      .finally(() => (this.#round = undefined));
    return this.#round;
  }

  async #keep(): Promise<void> {
    if (Date.now() - this.#scannedAt >= SCAN_MS) {
      this.#scannedAt = Date.now();
      const driver = await this.#host.driver();
      const found = new Set<string>();
      for (const entry of await driver.list("")) {
        const queue = await this.#queueOf(entry);
        // Unreadable now (a storage failure): kept, as if it had some.
        const some =
          queue !== undefined &&
          (await this.list(queue).then(
            (list) => list.length > 0,
            () => true,
          ));
        if (some) found.add(queue!);
      }
      this.#queues.clear();
      for (const queue of found) this.#queues.add(queue);
    }
    for (const queue of this.#queues) {
      if (!this.#timer) return;
      const writers = (await this.#partitioned(queue)) ? this.#host.partitionedWriters : this.#host.writers;
      await writers.holdForSchedules(queue).catch(() => {});
    }
  }
}
