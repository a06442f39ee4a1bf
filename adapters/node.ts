/**
 * The `v-queue` entry on Node: the engine, with the fs driver as the default storage
 * (`dir`, default `./queues`). Elsewhere `v-queue` resolves to the bare engine, which
 * needs a `driver`.
 */
import { QueueConsumer } from "../src/consumer";
import type { ConsumerOptions, QueueOptions } from "../src/options";
import { QueueWriter } from "../src/writer";
import fsDriver from "./drivers/fs";

export * from "../src/index";

/** Opens a queue for writing, on `options.driver` or else the fs driver on `options.dir`. */
export function openQueue(name: string, options: QueueOptions = {}): Promise<QueueWriter> {
  return QueueWriter.open(name, withDefaultDriver(options));
}

/** Opens consumer `name` of `queue`, on `options.driver` or else the fs driver on `options.dir`. */
export function openConsumer(queue: string, name: string, options: ConsumerOptions = {}): Promise<QueueConsumer> {
  return QueueConsumer.open(queue, name, withDefaultDriver(options));
}

function withDefaultDriver<T extends QueueOptions | ConsumerOptions>(options: T): T {
  return options.driver ? options : { ...options, driver: fsDriver({ dir: options.dir }) };
}
