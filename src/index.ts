export { QueueWriter, openQueue } from "./writer/writer";
export type { ProduceOptions, ProduceResult } from "./writer/produce";
export type { Schedule, ScheduleInput } from "./writer/schedules";
// Public: a partitioned queue's are read from its partition 0.
export { readQueueSchedules as readSchedules } from "./writer/partitioned";
export { MAX_DELAY_MS } from "./writer/produce";
export { QueueConsumer, openConsumer } from "./consumers/ordered/consumer";
export type { ReadOptions, WaitOptions, PollOptions, IterateOptions } from "./consumers/ordered/consumer";
export type { SeekTarget } from "./log/seek";
export { SharedConsumer, openSharedConsumer } from "./consumers/shared/consumer";
export type { LeasedMessage, LeaseRef, SharedPollOptions, NackOptions, SharedStats, AckOptions, AckAllOptions } from "./consumers/shared/consumer";
export { followOutcomes, waitForOutcome } from "./consumers/shared/outcomes";
export type { FollowOutcomesOptions, WaitForOutcomeOptions, OutcomeMessage } from "./consumers/shared/outcomes";
export type { OutcomeEvent, OutcomeKind } from "./consumers/types";
export { MAX_OUTCOME_BYTES } from "./format/outcome";
export type { SharedIterateOptions } from "./consumers/shared/iterate";
export type { SharedConsumerOptions, ResolvedSharedOptions } from "./options/shared";
export type { ConsumerKind } from "./consumers/kind";
export type { OrderedConsumer, LeasingConsumer, ConsumedMessage, LeasingStats } from "./consumers/types";
export { openOrderedConsumer, openLeasingConsumer } from "./open-consumer";
export { redrive, parseDeadLetter } from "./consumers/shared/dead-letter";
export type { DeadLetter, RedriveOptions } from "./consumers/shared/dead-letter";
export { listQueues, inspectQueue, listConsumers, consumerLag } from "./inspect/queues";
export { storageOverview } from "./inspect/overview";
export type { OverviewOptions } from "./inspect/overview";
export type { ConsumerOverview, ConsumerStats, QueueOverview, QueueStats } from "./inspect/types";
export type { SharedFileStats } from "./inspect/shared";
export { browseMessages } from "./inspect/browse";
export type { BrowseFrom, BrowseOptions, BrowseResult } from "./inspect/browse";
export { partDetails } from "./inspect/part-details";
export type { PartDetails } from "./inspect/part-details";
export { purgeQueue } from "./admin/purge";
export type { PurgeResult } from "./admin/purge";
export { deleteQueue, deleteConsumer } from "./admin/delete";
export type { DeleteQueueResult } from "./admin/delete";
export { invalidateTotals } from "./log/totals";
export { VQueueError } from "./core/errors";
export type { VQueueErrorCode, QueueProblem } from "./core/errors";
export { defineDriver } from "./core/driver";
export type { QueueDriver, LogFile, RecordFile, DriverLock } from "./core/driver";
export type { Message, MessageInput, MessagePosition, JsonValue } from "./format/message";
export { messageJSON } from "./format/message";
export { formatCursor, parseCursor, positionAfter } from "./format/position";
export type { ConsumerPosition } from "./format/position";
export { isValidName, isValidQueueName, isValidConsumerName, assertName, nameRule, NAME_RULE } from "./core/names";
export type {
  AdminOptions,
  QueueOptions,
  ConsumerOptions,
  ResolvedQueueOptions,
  ResolvedConsumerOptions,
  Durability,
  StartPosition,
  Compression,
} from "./options/queue";
export type { Zstd, ZstdLoader, Compressor, Decompressor } from "./compression/zstd";
export { crc32, useNativeCrc32, type Crc32Function } from "./format/crc32";
export { pruneQueue } from "./retention/prune";
export type { PruneResult, PruneOptions } from "./retention/prune";
export type { RetentionOptions } from "./options/retention";
export type { PrunedPart } from "./log/pruned";
export { PartitionedWriter, openPartitionedQueue } from "./writer/partitioned";
export type { PartitionedQueueOptions, PartitionedProduceOptions, PartitionedProduceResult } from "./writer/partitioned";
export type { HandoffOptions, ConsumerHandoffOptions } from "./instances/handoff";
export { partitionName, partitionOfKey, parsePartitionName, readPartitions, declarePartitions, MAX_PARTITIONS } from "./partitions/declaration";
export { PartitionedConsumer, openPartitionedConsumer } from "./consumers/ordered/partitioned";
export type { PartitionedConsumerOptions, PartitionedMessage } from "./consumers/ordered/partitioned";
export { PartitionedSharedConsumer, openPartitionedSharedConsumer, openPartitionedShared } from "./consumers/shared/partitioned";
export type { PartitionedSharedOptions, PartitionedLeasedMessage, PartitionedLeaseRef } from "./consumers/shared/partitioned";
export { formatPartitionedCursor, parsePartitionedCursor } from "./partitions/cursor";
