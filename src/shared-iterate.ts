import type { LeasedMessage, SharedConsumer, SharedPollOptions } from "./shared-consumer";

export interface SharedIterateOptions extends Omit<SharedPollOptions, "timeoutMs"> {
  /** Messages leased per poll; those not reached yet when the loop ends are nacked. @default 1 */
  max?: number;
}

/**
 * `shared.messages()`: polls and yields leased messages until `signal` aborts or the loop
 * ends. A message is acked once the loop body is done with it (the next step of the loop);
 * when the body throws or breaks, the message in hand is nacked (a generator cannot tell a
 * throw from a break, nor see the error), and so are those of its batch not reached yet.
 */
export async function* iterateShared(consumer: SharedConsumer, options: SharedIterateOptions = {}): AsyncGenerator<LeasedMessage, void, undefined> {
  const { signal, max = 1, ...pollOptions } = options;
  let batch: LeasedMessage[] = [];
  let next = 0;
  let inHand: LeasedMessage | undefined;
  try {
    while (!signal?.aborted) {
      batch = await consumer.poll({ ...pollOptions, max, signal });
      for (next = 0; next < batch.length; ) {
        inHand = batch[next++]!;
        yield inHand;
        const done = inHand;
        inHand = undefined;
        await consumer.ack(done);
        if (signal?.aborted) break;
      }
      if (next === batch.length) batch = [];
    }
  } finally {
    if (!consumer.closed) {
      const giveBack = inHand ? [inHand, ...batch.slice(next)] : batch.slice(next);
      for (const message of giveBack) {
        const error = message === inHand ? "the loop ended while the message was in hand (a throw or a break)" : undefined;
        await consumer.nack(message, { error }).catch(() => {});
      }
    }
  }
}
