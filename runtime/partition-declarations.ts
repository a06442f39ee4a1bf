import type { QueueDriver } from "../src/core/driver";
import { VQueueError } from "../src/core/errors";
import { declarePartitions, readPartitions } from "../src/partitions/declaration";
import { ApiError } from "./errors";

/**
 * How long "not partitioned" is believed: another instance may declare the queue meanwhile
 * (a declaration is refused once the queue exists as an ordinary one, so only a queue nobody
 * wrote yet can change kind, and one read a second per queue is cheap).
 */
const UNPARTITIONED_TTL_MS = 1000;

/**
 * Which queues are partitioned, and how many partitions each has: read from the declaration
 * file once (a count never changes), "not partitioned" re-read after a second. Declares the
 * queues the app's `queues` option names partitioned, once, before any answer.
 */
export class PartitionDeclarations {
  #counts = new Map<string, number>();
  #unpartitioned = new Map<string, number>();
  #startup: Promise<void> | undefined;

  constructor(
    private readonly driver: () => Promise<QueueDriver>,
    private readonly configured: [queue: string, partitions: number][],
    private readonly sync: boolean,
  ) {}

  /**
   * Declares the configured queues (once). A failure is thrown to every caller waiting on it,
   * and the next caller tries again: storage that was unreachable for a moment (a Redis
   * failover) must not leave the app unable to serve partitioned queues for its whole life.
   */
  startup(): Promise<void> {
    this.#startup ??= (async () => {
      for (const [queue, partitions] of this.configured) await this.declare(queue, partitions);
    })().catch((error: unknown) => {
      this.#startup = undefined;
      throw error;
    });
    return this.#startup;
  }

  /** The partition count of `queue`, or undefined for an ordinary (or missing) queue. */
  async count(queue: string): Promise<number | undefined> {
    await this.startup();
    const known = this.#counts.get(queue);
    if (known !== undefined) return known;
    const checked = this.#unpartitioned.get(queue);
    if (checked !== undefined && Date.now() - checked < UNPARTITIONED_TTL_MS) return undefined;
    const count = await readPartitions(await this.driver(), queue);
    if (count === undefined) this.#unpartitioned.set(queue, Date.now());
    else this.#learn(queue, count);
    return count;
  }

  /**
   * Declares `queue` with `count` partitions: true when this call declared it, false when it
   * already was so. Another count, or an ordinary queue of that name: 409 `E_CONFLICT`.
   */
  async declare(queue: string, count: number): Promise<boolean> {
    const driver = await this.driver();
    if ((await readPartitions(driver, queue)) === count) {
      this.#learn(queue, count);
      return false;
    }
    try {
      await declarePartitions(driver, queue, count, { sync: this.sync });
    } catch (error) {
      // The engine says E_OPTION for "declared otherwise" and "an ordinary queue": a conflict with what exists, not a bad request.
      if (VQueueError.isError(error) && error.code === "E_OPTION") throw new ApiError(409, "E_CONFLICT", error.message);
      throw error;
    }
    this.#learn(queue, count);
    return true;
  }

  /** Forgets what is known of `queue` (it was deleted). */
  forget(queue: string): void {
    this.#counts.delete(queue);
    this.#unpartitioned.delete(queue);
  }

  /** Every queue known partitioned here, with its count. */
  known(): Map<string, number> {
    return new Map(this.#counts);
  }

  #learn(queue: string, count: number): void {
    this.#counts.set(queue, count);
    this.#unpartitioned.delete(queue);
  }
}
