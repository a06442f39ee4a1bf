import type { ConsumedMessage, OrderedConsumer } from "../types";
import type { IterateOptions } from "../../options/queue";

/**
 * `messages()` of an ordered consumer (plain or partitioned): reads and waits (through `poll`)
 * until `signal` aborts or the loop breaks. With `autoCommit`, a batch is committed once the
 * loop body has finished with all of it; on `break` or a throw, everything before the message
 * in hand is committed and that message is handed out again (at-least-once). A partitioned
 * consumer's batch spans partitions: each partition's last message done is committed.
 */
export async function* iterateMessages<M extends ConsumedMessage>(
  consumer: OrderedConsumer<M, never>,
  options: IterateOptions = {},
): AsyncGenerator<M, void, undefined> {
  const { signal, autoCommit = true, ...readOptions } = options;
  let inHand: M | undefined;
  /** The last message done per partition (plain queue: the one key `undefined`), not committed yet. */
  const done = new Map<number | undefined, M>();
  const commitDone = async () => {
    const messages = [...done.values()];
    done.clear();
    await Promise.all(messages.map((message) => consumer.commit(message)));
  };
  try {
    while (!signal?.aborted) {
      const batch = await consumer.poll({ ...readOptions, signal });
      for (const message of batch) {
        inHand = message;
        yield message;
        done.set(message.partition, message);
        inHand = undefined;
        if (signal?.aborted) return;
      }
      if (autoCommit) await commitDone();
    }
  } finally {
    if (autoCommit && !consumer.closed) {
      await commitDone();
      if (inHand) await consumer.rewind();
    }
  }
}
