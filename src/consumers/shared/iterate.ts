import type { LeasedMessage, LeasingConsumer, SharedIterateOptions } from "../types";

export type { SharedIterateOptions } from "../types";

/**
 * `messages()` of a leasing consumer (plain or partitioned): polls and yields leased messages until `signal` aborts or the loop
 * ends. A message is acked once the loop body is done with it (the next step of the loop);
 * when the body throws or breaks, the message in hand is nacked (a generator cannot tell a
 * throw from a break, nor see the error), and so are those of its batch not reached yet.
 */
export async function* iterateShared<L extends LeasedMessage>(
  consumer: LeasingConsumer<L, L>,
  options: SharedIterateOptions = {},
): AsyncGenerator<L, void, undefined> {
  const { signal, max = 1, ...pollOptions } = options;
  let batch: L[] = [];
  let next = 0;
  let inHand: L | undefined;
  try {
    while (!signal?.aborted) {
      batch = await consumer.poll({ ...pollOptions, max, signal });
      for (next = 0; next < batch.length;) {
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
