import type { ConsumerPosition } from "./cursor";
import type { DriverLock, QueueDriver } from "./driver";
import { formatPopInfo, parsePopInfo } from "./info";
import { popInfoPath } from "./paths";

const decoder = new TextDecoder();
const ascii = new TextEncoder();

/**
 * A consumer's saved position, `Q_info_pop_C` (FORMAT.md), rewritten in place as the crate
 * does. Opened for each write only: an idle consumer holds no descriptor for it.
 */
export class PositionFile {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #consumer: string;
  readonly #lock: DriverLock;
  readonly #sync: boolean;

  constructor(driver: QueueDriver, queue: string, consumer: string, lock: DriverLock, sync: boolean) {
    this.#driver = driver;
    this.#queue = queue;
    this.#consumer = consumer;
    this.#lock = lock;
    this.#sync = sync;
  }

  /**
   * The saved position; `"missing"` when there is no file, `"empty"` for an empty one (the
   * crate's leftover, FORMAT.md bug 1: a consumer with no position yet), `"unreadable"` when
   * its line does not parse.
   */
  async load(): Promise<ConsumerPosition | "missing" | "empty" | "unreadable"> {
    const bytes = await this.#driver.readFile(popInfoPath(this.#queue, this.#consumer));
    if (!bytes) return "missing";
    if (bytes.length === 0) return "empty";
    const pop = parsePopInfo(decoder.decode(bytes), this.#queue, this.#consumer);
    return pop ? { part: pop.part, position: pop.position, count: pop.count } : "unreadable";
  }

  async save(position: ConsumerPosition): Promise<void> {
    // A holder whose lease ran out must not write over the new holder's position.
    await this.#lock.assertHeld?.();
    const line = formatPopInfo({ queue: this.#queue, consumer: this.#consumer, ...position });
    const file = await this.#driver.open(popInfoPath(this.#queue, this.#consumer), { create: true });
    try {
      await file!.write(0, ascii.encode(line));
      if (this.#sync) await file!.sync();
    } finally {
      await file!.close();
    }
  }
}
