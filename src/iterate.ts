import type { Message } from "./message";
import type { IterateOptions, QueueConsumer } from "./consumer";

/**
 * `consumer.messages()`: reads and waits (through `poll`) until `signal` aborts or the loop
 * breaks. With `autoCommit`, a batch is committed once the loop body has finished with all of
 * it; on `break` or a throw, everything before the message in hand is committed and that
 * message is handed out again (at-least-once).
 */
export async function* iterateMessages(consumer: QueueConsumer, options: IterateOptions = {}): AsyncGenerator<Message, void, undefined> {
  const { signal, autoCommit = true, ...readOptions } = options;
  let inHand: Message | undefined;
  let done: Message | undefined;
  try {
    while (!signal?.aborted) {
      const batch = await consumer.poll({ ...readOptions, signal });
      for (const message of batch) {
        inHand = message;
        yield message;
        done = message;
        inHand = undefined;
        if (signal?.aborted) return;
      }
      if (autoCommit && done) await consumer.commit(done);
    }
  } finally {
    if (autoCommit && !consumer.closed) {
      if (done) await consumer.commit(done);
      if (inHand) await consumer.rewind();
    }
  }
}
