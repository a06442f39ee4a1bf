/**
 * What the consume and lease routes need of a queue's kind, plain or partitioned: how its
 * cursors, seek targets and lease tokens are written (checked before anything is opened), how
 * its answers are framed, and its consumers' slots (one interface per kind: `OrderedSlot`,
 * `LeasingSlot`). The one place the HTTP layer asks whether a queue is partitioned.
 */
import type { SeekRequest } from "../protocol/api";
import { encodeBatch, encodeLeases, parseLeaseToken, PARTITIONED_LEASE_TOKEN } from "../protocol/binary";
import { cursorAfter, isCursor } from "../protocol/cursor";
import type { ConsumedMessage, LeasedMessage, LeaseRef } from "../src/consumers/types";
import type { MessageInput } from "../src/format/message";
import type { PartitionedProduceOptions, PartitionedProduceResult } from "../src/writer/partitioned";
import type { ProduceResult } from "../src/writer/produce";
import { formatPartitionedCursor, parsePartitionedCursor } from "../src/partitions/cursor";
import type { OrderedSlot } from "./consumer-slot";
import { ApiError } from "./errors";
import type { QueueRegistry } from "./registry";
import type { LeasingSlot } from "./shared-slot";

/** What a produce wrote: on a partitioned queue, with the partition it went to. */
export type FormProduced = ProduceResult & { partition?: number };

export interface QueueForm {
  /** A partitioned queue's partition count; undefined for a plain queue. */
  readonly partitions: number | undefined;
  /** Writes a produce's messages; a `partitionKey` on a plain queue is refused with `bad(why)`. */
  produce(messages: MessageInput[], options: PartitionedProduceOptions, bad: (why: string) => Error): Promise<FormProduced>;
  /** A cursor from outside, checked (400 `E_PARAM` saying what is expected); `name` says where it came from. */
  cursor(value: unknown, name: string): string;
  /** The `to` of a seek body, checked (400 `E_PARAM` saying what is allowed). */
  seekTarget(to: unknown): SeekRequest["to"];
  /** How a lease token is written, for error messages. */
  readonly leaseTokenForm: string;
  /** A lease token from outside as a ref; `bad(why)` makes the error of a malformed one. */
  leaseRef(token: string, bad: (why?: string) => Error): LeaseRef;
  /** The cursor that commits everything of a batch (composite on a partitioned queue). */
  batchCursor(messages: ConsumedMessage[]): string | undefined;
  /** The binary consume answer: VQB1, or VQP1 with each record's partition. */
  encodeBatch(messages: ConsumedMessage[]): Uint8Array<ArrayBuffer>;
  /** The binary lease answer: VQL1, or VQM1 with each record's partition. */
  encodeLeases(messages: LeasedMessage[], now: number): Uint8Array<ArrayBuffer>;
  /** The slot of ordered consumer `name` (opened, and with `create` the consumer created, on first use). */
  ordered(name: string, create?: boolean): Promise<OrderedSlot>;
  /**
   * Commits `cursor` (everything handed out when undefined) of ordered consumer `name`, wherever
   * it is held: a consumer another instance holds takes it through its inbox.
   */
  commit(name: string, cursor: string | undefined): Promise<string>;
  /** The slot of shared consumer `name` (opened, and the consumer created, on first use). */
  leasing(name: string): Promise<LeasingSlot>;
}

/** `queue`'s form, from its declaration (asked at each request: a queue missing now may be declared partitioned later). */
export async function queueForm(registry: QueueRegistry, queue: string): Promise<QueueForm> {
  const partitions = await registry.partitions.count(queue);
  return partitions === undefined ? plainForm(registry, queue) : partitionedForm(registry, queue, partitions);
}

function plainForm(registry: QueueRegistry, queue: string): QueueForm {
  return {
    partitions: undefined,
    async produce(messages, { partitionKey, ...options }, bad) {
      if (partitionKey !== undefined) throw bad(`Queue "${queue}" is not partitioned: a partition key is for a partitioned queue.`);
      // Keyed, delayed, with attributes, or empty (which the writer's produce refuses: E_MESSAGE): the writer's produce.
      if (Object.values(options).some((value) => value !== undefined) || messages.length === 0) return registry.writers.produce(queue, messages, options);
      // Neither delayed nor keyed: the writer's plain push (no idempotency look-up).
      const positions = await registry.writers.push(queue, messages);
      return { count: positions.length, first: positions[0], last: positions.at(-1), replayed: false };
    },
    cursor(value, name) {
      if (!isCursor(value))
        throw new ApiError(400, "E_PARAM", `Invalid ${name} ${JSON.stringify(value)}: expected a cursor "<part>.<position>.<count>" as given with a message.`);
      return value;
    },
    seekTarget(to) {
      if (to === "earliest" || to === "latest" || isCursor(to)) return to as string;
      const target = to as { part?: unknown; seq?: unknown } | null;
      if (
        target &&
        typeof target === "object" &&
        Number.isSafeInteger(target.part) &&
        Number.isSafeInteger(target.seq) &&
        (target.part as number) >= 0 &&
        (target.seq as number) >= 1
      ) {
        return { part: target.part as number, seq: target.seq as number };
      }
      const time = seekTime(to);
      if (time !== undefined) return { time };
      throw new ApiError(
        400,
        "E_PARAM",
        `Invalid seek target ${JSON.stringify(to) ?? "(none)"}: use "earliest", "latest", a cursor "<part>.<position>.<count>", {"part": n >= 0, "seq": n >= 1}, or {"time": "2026-12-03T10:00:00Z" or ms since the epoch}.`,
      );
    },
    leaseTokenForm: '"<part>.<offset>.<lease>"',
    leaseRef(token, bad) {
      if (PARTITIONED_LEASE_TOKEN.test(token)) throw bad(" (queue is not partitioned: a lease names no partition)");
      const ref = parseLeaseToken(token);
      if (!ref) throw bad();
      return ref;
    },
    batchCursor: (messages) => {
      const last = messages.at(-1);
      return last ? cursorAfter(last) : undefined;
    },
    encodeBatch: (messages) => encodeBatch(messages),
    encodeLeases: (messages, now) => encodeLeases(messages, now),
    ordered: (name, create = true) => registry.consumer(queue, name, create),
    commit: (name, cursor) => registry.commit(queue, name, cursor),
    leasing: (name) => registry.shared(queue, name),
  };
}

function partitionedForm(registry: QueueRegistry, queue: string, partitions: number): QueueForm {
  const cursor = (value: unknown): string => {
    try {
      parsePartitionedCursor(value, partitions);
    } catch (error) {
      throw new ApiError(400, "E_PARAM", (error as Error).message);
    }
    return value as string;
  };
  return {
    partitions,
    produce: (messages, options): Promise<PartitionedProduceResult> => registry.partitionedWriters.produce(queue, messages, options),
    cursor,
    // Every partition to "earliest", "latest" or a time, or the partitions a composite cursor names.
    seekTarget(to) {
      if (to === "earliest" || to === "latest") return to;
      const time = seekTime(to);
      if (time !== undefined) return { time };
      if (typeof to !== "string") {
        throw new ApiError(
          400,
          "E_PARAM",
          `Invalid seek target ${JSON.stringify(to) ?? "(none)"} for a partitioned queue: use "earliest", "latest", {"time": ...}, or a cursor "p<partition>:<part>.<position>.<count>,..." (the partitions it names).`,
        );
      }
      return cursor(to);
    },
    leaseTokenForm: '"p<partition>:<part>.<offset>.<lease>"',
    leaseRef(token, bad) {
      const match = PARTITIONED_LEASE_TOKEN.exec(token);
      if (!match) throw bad(parseLeaseToken(token) ? " (the queue is partitioned: the lease must name its partition)" : "");
      const partition = Number(match[1]);
      const ref = parseLeaseToken(match[2]!);
      if (!ref || partition >= partitions) throw bad(ref ? ` (the queue has ${partitions} partitions)` : "");
      return { ...ref, partition };
    },
    batchCursor: (messages) => {
      if (messages.length === 0) return undefined;
      // Each partition's last message of the batch.
      const last = new Map<number, string>();
      for (const m of messages) last.set(m.partition!, cursorAfter(m));
      return formatPartitionedCursor(last);
    },
    encodeBatch: (messages) => encodeBatch(messages, true),
    encodeLeases: (messages, now) => encodeLeases(messages, now, true),
    // Each partition this server can hold (hand-over with other instances); always created.
    ordered: (name) => registry.partitionedConsumer(queue, name),
    commit: async (name, cursor) => (await registry.partitionedConsumer(queue, name)).commit(cursor),
    leasing: (name) => registry.partitionedShared(queue, name),
  };
}

/** The time of a `{ "time": ISO date or ms }` target, if `to` is one. */
function seekTime(to: unknown): string | number | undefined {
  const time = (to as { time?: unknown } | null)?.time;
  return (typeof time === "number" && Number.isFinite(time)) || (typeof time === "string" && Number.isFinite(Date.parse(time))) ? time : undefined;
}
