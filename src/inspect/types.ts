/** What the listings of a storage tell (inspect/queues.ts, inspect/overview.ts), a partitioned queue's sums included (inspect/partitioned.ts). */
import type { ConsumerKind } from "../consumers/kind";
import type { ConsumerPosition } from "../format/position";
import type { SharedFileStats } from "./shared";
import type { QueueTotals } from "../log/totals";

/** What `inspectQueue` tells about a queue, from its info lines (and its part files once its writer is gone). */
export interface QueueStats {
  name: string;
  /** The writer's current part. */
  currentPart: number;
  /** Records in the current part. */
  currentCount: number;
  parts: { id: number; bytes: number; messages: number }[];
  messages: number;
  bytes: number;
  consumers: ConsumerStats[];
  /** A partitioned queue (inspect/partitioned.ts): its partition count; its totals and consumers' lag are summed over `partitionQueues`. */
  partitions?: number;
  /** Each partition's stats, as an ordinary queue's (partitions never written are left out). */
  partitionQueues?: QueueStats[];
}

export interface ConsumerStats extends ConsumerPosition {
  name: string;
  /** `ordered`: one cursor (the position); `shared`: leases and acks per message, the position is its ack floor. */
  kind: ConsumerKind;
  /**
   * Messages pushed and not yet committed by this consumer; for a shared one, those after its
   * floor not acknowledged yet (acks above the floor do not count).
   */
  lag: number;
  /** A shared consumer's state, from its files (inspect/shared.ts). */
  shared?: SharedFileStats;
}

export interface ConsumerOverview extends ConsumerPosition {
  name: string;
  kind: ConsumerKind;
  /** Messages after its position (a shared consumer: after its ack floor, acks above it not counted). */
  lag: number;
  /** Bytes of the records after its position. */
  lagBytes: number;
}

export interface QueueOverview {
  name: string;
  totals: QueueTotals;
  consumers: ConsumerOverview[];
  /** A partitioned queue (inspect/partitioned.ts): its partition count; its totals and consumers' lag are summed over `partitionQueues`. */
  partitions?: number;
  /** Each partition's overview, as an ordinary queue's (partitions never written are left out). */
  partitionQueues?: QueueOverview[];
}
