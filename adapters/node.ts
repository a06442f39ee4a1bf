/**
 * The `v-queue` entry on Node: the engine, with the fs driver as the default storage
 * (`dir`, default `./queues`) and the native zstd when it loads (`autoZstd`, else the
 * WebAssembly one). Elsewhere `v-queue` resolves to the bare engine, which needs a `driver`
 * and uses the WebAssembly zstd unless given another.
 */
import { QueueConsumer } from "../src/consumers/ordered/consumer";
import type { ConsumerOptions as EngineConsumerOptions, QueueOptions as EngineQueueOptions } from "../src/options/queue";
import { QueueWriter } from "../src/writer/writer";
import { SharedConsumer } from "../src/consumers/shared/consumer";
import type { SharedConsumerOptions as EngineSharedConsumerOptions } from "../src/options/shared";
import { resolveDriver } from "./storage";
import {
  followOutcomes as followEngineOutcomes,
  waitForOutcome as waitForEngineOutcome,
  type FollowOutcomesOptions as EngineFollowOutcomesOptions,
  type OutcomeMessage,
  type WaitForOutcomeOptions as EngineWaitForOutcomeOptions,
} from "../src/consumers/shared/outcomes";
import type { OutcomeEvent } from "../src/consumers/types";
import type { QueueDriver } from "../src/core/driver";
import { autoZstd } from "./zstd-native";
import { handNativeCrc32 } from "./native-crc32";

export * from "../src/index";

handNativeCrc32();

interface DirOption {
  /** Data directory of the fs driver, used when no `driver` is given. @default "./queues" */
  dir?: string;
}

export interface QueueOptions extends EngineQueueOptions, DirOption {}
export interface ConsumerOptions extends EngineConsumerOptions, DirOption {}
export interface SharedConsumerOptions extends EngineSharedConsumerOptions, DirOption {}

/** Opens a queue for writing, on `options.driver` or else the fs driver on `options.dir` (zstd: `autoZstd` unless given). */
export async function openQueue(name: string, { dir, ...options }: QueueOptions = {}): Promise<QueueWriter> {
  return QueueWriter.open(name, { ...options, zstd: options.zstd ?? autoZstd, driver: await resolveDriver({ driver: options.driver, dir }) });
}

/** Opens consumer `name` of `queue`, on `options.driver` or else the fs driver on `options.dir` (zstd: `autoZstd` unless given). */
export async function openConsumer(queue: string, name: string, { dir, ...options }: ConsumerOptions = {}): Promise<QueueConsumer> {
  return QueueConsumer.open(queue, name, { ...options, zstd: options.zstd ?? autoZstd, driver: await resolveDriver({ driver: options.driver, dir }) });
}

/** Opens shared consumer `name` of `queue` (docs/work-queues.md), on `options.driver` or else the fs driver on `options.dir`. */
export async function openSharedConsumer(queue: string, name: string, { dir, ...options }: SharedConsumerOptions = {}): Promise<SharedConsumer> {
  return SharedConsumer.open(queue, name, { ...options, zstd: options.zstd ?? autoZstd, driver: await resolveDriver({ driver: options.driver, dir }) });
}

/** A reader's storage: `driver`, or else the fs driver on `dir`. */
type StorageOption = DirOption & { driver?: QueueDriver };
export type FollowOutcomesOptions = Omit<EngineFollowOutcomesOptions, "driver"> & StorageOption;
export type WaitForOutcomeOptions = Omit<EngineWaitForOutcomeOptions, "driver"> & StorageOption;

/** A shared consumer's outcome events as they are written (docs/work-queues.md#outcomes), on `options.driver` or else the fs driver on `options.dir`. */
export async function* followOutcomes(
  queue: string,
  consumer: string,
  { dir, ...options }: FollowOutcomesOptions = {},
): AsyncGenerator<OutcomeEvent, void, undefined> {
  yield* followEngineOutcomes(queue, consumer, { ...options, driver: await resolveDriver({ driver: options.driver, dir }) });
}

/** A message's end in a shared consumer's outcomes, or undefined at the timeout (docs/work-queues.md#outcomes), on `options.driver` or else the fs driver on `options.dir`. */
export async function waitForOutcome(
  queue: string,
  consumer: string,
  message: OutcomeMessage,
  { dir, ...options }: WaitForOutcomeOptions = {},
): Promise<OutcomeEvent | undefined> {
  return waitForEngineOutcome(queue, consumer, message, { ...options, driver: await resolveDriver({ driver: options.driver, dir }) });
}
