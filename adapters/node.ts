/**
 * The `v-queue` entry on Node: the engine, with the fs driver as the default storage
 * (`dir`, default `./queues`). Elsewhere `v-queue` resolves to the bare engine, which
 * needs a `driver`.
 */
import { QueueConsumer } from "../src/consumer";
import type { ConsumerOptions as EngineConsumerOptions, QueueOptions as EngineQueueOptions } from "../src/options";
import { QueueWriter } from "../src/writer";
import { resolveDriver } from "./storage";

export * from "../src/index";

interface DirOption {
  /** Data directory of the fs driver, used when no `driver` is given. @default "./queues" */
  dir?: string;
}

export interface QueueOptions extends EngineQueueOptions, DirOption {}
export interface ConsumerOptions extends EngineConsumerOptions, DirOption {}

/** Opens a queue for writing, on `options.driver` or else the fs driver on `options.dir`. */
export async function openQueue(name: string, { dir, ...options }: QueueOptions = {}): Promise<QueueWriter> {
  return QueueWriter.open(name, { ...options, driver: await resolveDriver({ driver: options.driver, dir }) });
}

/** Opens consumer `name` of `queue`, on `options.driver` or else the fs driver on `options.dir`. */
export async function openConsumer(queue: string, name: string, { dir, ...options }: ConsumerOptions = {}): Promise<QueueConsumer> {
  return QueueConsumer.open(queue, name, { ...options, driver: await resolveDriver({ driver: options.driver, dir }) });
}
