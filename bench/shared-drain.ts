import type { LeasedMessage, SharedConsumer } from "v-queue";

/**
 * `loops` workers, each polling up to `max` and acknowledging each message (a no-op handler);
 * returns the seconds until `total` acks were durable (loops still waiting in a poll then end
 * at its timeout, not timed). `onLeased` sees each message in the order the polls handed them out.
 */
export async function drainShared(
  consumer: SharedConsumer,
  total: number,
  loops: number,
  max: number,
  onAcked?: (acked: number) => void,
  onLeased?: (message: LeasedMessage) => void,
): Promise<number> {
  let acked = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const loop = async () => {
    while (acked < total) {
      const batch = await consumer.poll({ max, timeoutMs: 50 });
      if (onLeased) for (const message of batch) onLeased(message);
      await Promise.all(
        batch.map(async (message) => {
          await consumer.ack(message);
          // Counted apart: an optional call skips evaluating its arguments.
          acked++;
          onAcked?.(acked);
          if (acked === total) finish();
        }),
      );
    }
  };
  const start = performance.now();
  const loopsDone = Promise.all(Array.from({ length: loops }, loop));
  await Promise.race([finished, loopsDone.then(() => Promise.reject(new Error(`shared consumer drained ${acked} of ${total}`)))]);
  const seconds = (performance.now() - start) / 1000;
  await loopsDone;
  return seconds;
}
