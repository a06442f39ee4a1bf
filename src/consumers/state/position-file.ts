import type { ConsumerPosition } from "../../format/position";
import type { DriverLock, QueueDriver, RecordFile } from "../../core/driver";
import { fencedRecord } from "../../storage/fence";
import { formatPopInfo, parsePopInfo } from "../../format/info";
import { popInfoPath } from "../../storage/paths";

const decoder = new TextDecoder();
const ascii = new TextEncoder();
const IDLE_CLOSE_MS = 1000;

/** A consumer's saved position from its file, or undefined (missing, damaged, not a file). */
export async function readPosition(driver: QueueDriver, queue: string, name: string): Promise<ConsumerPosition | undefined> {
  try {
    const bytes = await driver.readRecord(popInfoPath(queue, name));
    const pop = bytes && parsePopInfo(decoder.decode(bytes), queue, name);
    return pop ? { part: pop.part, position: pop.position, count: pop.count } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A consumer's saved position, `Q_info_pop_C` (docs/format.md#files-of-a-queue), rewritten in place as the crate
 * does. The file is kept open while the consumer commits (a commit per batch would otherwise
 * pay an open and a close, each a thread-pool round trip on Node) and closed a second after
 * the last commit: an idle consumer holds no descriptor for it.
 */
export class PositionFile {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #consumer: string;
  readonly #lock: DriverLock;
  readonly #sync: boolean;
  #file: RecordFile | undefined;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(driver: QueueDriver, queue: string, consumer: string, lock: DriverLock, sync: boolean) {
    this.#driver = driver;
    this.#queue = queue;
    this.#consumer = consumer;
    this.#lock = lock;
    this.#sync = sync;
  }

  /**
   * The saved position; `"missing"` when there is no file, `"empty"` for an empty one (the
   * crate's leftover, docs/format.md#where-the-crate-027-goes-wrong fault 1: a consumer with no position yet), `"unreadable"` when
   * its line does not parse.
   */
  async load(): Promise<ConsumerPosition | "missing" | "empty" | "unreadable"> {
    const bytes = await this.#driver.readRecord(popInfoPath(this.#queue, this.#consumer));
    if (!bytes) return "missing";
    if (bytes.length === 0) return "empty";
    const pop = parsePopInfo(decoder.decode(bytes), this.#queue, this.#consumer);
    return pop ? { part: pop.part, position: pop.position, count: pop.count } : "unreadable";
  }

  /** Writes `position` (one at a time: the consumer chains its commits). */
  async save(position: ConsumerPosition): Promise<void> {
    clearTimeout(this.#closeTimer);
    // A holder whose lease ran out must not write over the new holder's position.
    await this.#lock.assertHeld?.();
    const line = formatPopInfo({ queue: this.#queue, consumer: this.#consumer, ...position });
    // The lock is every write's fence: a driver with leases refuses the write of a holder taken over meanwhile.
    const file = (this.#file ??= fencedRecord((await this.#driver.openRecord(popInfoPath(this.#queue, this.#consumer), { create: true }))!, this.#lock));
    await file!.replace(ascii.encode(line));
    if (this.#sync) await file!.sync();
    this.#closeTimer = setTimeout(() => void this.close().catch(() => {}), IDLE_CLOSE_MS);
    (this.#closeTimer as { unref?: () => void }).unref?.();
  }

  async close(): Promise<void> {
    clearTimeout(this.#closeTimer);
    const file = this.#file;
    this.#file = undefined;
    await file?.close();
  }
}
