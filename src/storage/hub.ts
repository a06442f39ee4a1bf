import type { QueueDriver } from "../core/driver";

/**
 * In-process wake-ups: the writer of a queue and its consumers in this process share one hub
 * (found by the driver's `storageKey` and the queue name, so two driver instances on the same
 * storage meet). The writer announces each batch; waiting consumers wake at once, and learn
 * where the writer's part ends, without touching the storage.
 */

/** What the writer knows after a batch: readers of that part may read up to `edge` at once. */
export interface ChangeHint {
  part: number;
  edge: number;
  /** The bytes just written, `[start, edge)` of the part, when the writer kept them. */
  tail?: { start: number; data: Uint8Array };
}

type Listener = (hint?: ChangeHint) => void;

export class QueueHub {
  readonly #listeners = new Set<Listener>();
  /** The writers registered here, each with its check that it still surely holds the queue. */
  readonly #writers = new Set<() => boolean>();
  /** Where the writer's current part ends, as of its last batch. */
  #edge: { part: number; edge: number } | undefined;
  readonly #release: () => void;
  /** Bumped when the writers registered here change, and when one writes message attributes (`stamp`). */
  #writersChanged = 0;
  #attributesWritten = 0;

  /** @internal use `queueHub()` */
  constructor(release: () => void) {
    this.#release = release;
  }

  /** Calls `listener` on every change; returns the function that stops it. */
  onChange(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
      this.#releaseIfUnused();
    };
  }

  /** Announces a change: a batch (with its hint), or anything else that waiters must re-check. */
  emit(hint?: ChangeHint): void {
    this.#edge = hint && this.#writers.size > 0 ? { part: hint.part, edge: hint.edge } : undefined;
    for (const listener of [...this.#listeners]) listener(hint);
  }

  /** Whether anyone in this process waits (the writer then keeps its batch bytes for them). */
  get hasListeners(): boolean {
    return this.#listeners.size > 0;
  }

  /**
   * Whether the queue's writer is in this process (then waits need no polling): registered, and
   * its lease (if its lock is one) surely held. A writer whose lease went stale may have lost the
   * queue to another instance without knowing yet (an idle isolate in workerd runs no timer to
   * renew it): its edge is then no longer the queue's end, and waiters poll the storage.
   */
  get hasWriter(): boolean {
    for (const live of this.#writers) if (live()) return true;
    return false;
  }

  /** Where the writer in this process has written up to, as of its last batch; undefined when unknown. */
  get writerEdge(): { part: number; edge: number } | undefined {
    return this.hasWriter ? this.#edge : undefined;
  }

  /**
   * While the queue's writer is in this process: a value that changes when that writer changes or
   * writes message attributes (writer/attributes.ts). A reader that found no attribute file at
   * one stamp need not look again while the stamp is the same. Undefined with no writer here.
   */
  get stamp(): string | undefined {
    return this.hasWriter ? `${this.#writersChanged}:${this.#attributesWritten}` : undefined;
  }

  /** The writer here wrote message attributes (see `stamp`). */
  noteAttributes(): void {
    this.#attributesWritten++;
  }

  /** Registers the queue's writer (`live`: whether it still surely holds the queue); returns its unregister function. */
  registerWriter(live: () => boolean = () => true): () => void {
    this.#writers.add(live);
    this.#writersChanged++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#writers.delete(live);
      this.#writersChanged++;
      // Waiters re-check: they must now poll for a writer elsewhere (this also forgets the edge).
      this.emit();
      this.#releaseIfUnused();
    };
  }

  #releaseIfUnused(): void {
    if (this.#writers.size === 0 && this.#listeners.size === 0) this.#release();
  }
}

const hubs = new Map<string, QueueHub>();

/** The hub of `queue` if anyone in this process uses one (no hub is made). */
export function peekQueueHub(driver: QueueDriver, queue: string): QueueHub | undefined {
  return hubs.get(`${driver.storageKey}\u0000${queue}`);
}

/** The hub of `queue` on the driver's storage, shared by everyone in this process. */
export function queueHub(driver: QueueDriver, queue: string): QueueHub {
  const key = `${driver.storageKey}\u0000${queue}`;
  let hub = hubs.get(key);
  if (!hub) {
    const created: QueueHub = new QueueHub(() => {
      if (hubs.get(key) === created) hubs.delete(key);
    });
    hubs.set(key, (hub = created));
  }
  return hub;
}
