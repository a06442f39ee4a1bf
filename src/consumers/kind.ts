import type { DriverLock, QueueDriver } from "../core/driver";
import { VQueueError } from "../core/errors";
import { SharedState } from "./state/shared-state";

/**
 * A consumer name is one kind for its whole life, chosen when it is created: `ordered` (one
 * cursor, `Q_info_pop_C` only: the crate's kind) or `shared` (leases and acks per message,
 * consumers/shared/consumer.ts), marked by its `Q_info_shared_C` snapshot.
 */
export type ConsumerKind = "ordered" | "shared";

/**
 * Checks, under the consumer's lock, that the name is of `kind`, and marks a new shared one.
 * An existing ordered consumer (a pop line, no snapshot) is never turned into a shared one: its
 * readers may still count on its single cursor.
 */
export async function checkConsumerKind(
  driver: QueueDriver,
  queue: string,
  name: string,
  kind: ConsumerKind,
  isNew: boolean,
  sync: boolean,
  fence?: DriverLock,
): Promise<void> {
  const shared = await SharedState.exists(driver, queue, name);
  if (kind === "ordered" && shared) {
    throw new VQueueError(
      "E_KIND",
      `Consumer "${name}" of queue "${queue}" is a shared consumer: open it with openSharedConsumer, or use another name for an ordered one.`,
    );
  }
  if (kind === "shared" && !shared && !isNew) {
    throw new VQueueError(
      "E_KIND",
      `Consumer "${name}" of queue "${queue}" is an ordered consumer (one cursor): open it with openConsumer, or use another name for a shared one.`,
    );
  }
  // New: a state without a pop line is what a delete or a creation cut short left; its acks and
  // birth are no new consumer's (they would skip its messages, take a deleted one's leases).
  if (kind === "shared" && isNew) await SharedState.create(driver, queue, name, sync, fence);
}
