/**
 * A worker process for test/instances/shared-chaos.test.ts:
 * `node --import jiti/register test/helpers/chaos-worker.ts <url> <queue> <consumer> <name>`.
 * Runs the client's `worker()` (concurrency 8) on the shared consumer and prints one line per event,
 * with the time (ms since the epoch) so that the test can order events of different processes:
 * - `start <i> <deliveries> <granted>`: a handler began (`granted`: when the server leased it);
 * - `done <i> <deliveries>`: the handler succeeded (the worker acks it next);
 * - `fail <i> <deliveries>`: the handler threw;
 * - `acked <i> <t>`: the server answered 2xx to the ack (durable from then on).
 * Messages are JSON `{ i, poison? }`: a poison message always throws; others throw now and then
 * on their first two deliveries; one in 300 takes longer than its lease (the worker extends it).
 * SIGTERM stops the worker cleanly (`stopped`); the test SIGKILLs it too.
 */
import { createClient, type LeasedClientMessage } from "../../client/index";
import { sleep } from "./sleep";

const [url, queue, consumer, name] = process.argv.slice(2);
export const LEASE_MS = 1500;
const out = (line: string) => process.stdout.write(`${line}\n`);

interface Job {
  i: number;
  poison?: boolean;
}

const client = createClient({ baseURL: url!, timeout: 10_000 });
const worker = client.worker<Job>(
  queue!,
  consumer!,
  async (message: LeasedClientMessage<Job>) => {
    // Bytes stay bytes even with `json`: these are all JSON text.
    const { i, poison } = message.data as Job;
    out(`start ${i} ${message.deliveries} ${message.leaseUntil - LEASE_MS}`);
    if (poison || (message.deliveries <= 2 && Math.random() < 0.1)) {
      out(`fail ${i} ${message.deliveries}`);
      throw new Error(poison ? "poison" : "random failure");
    }
    const slow = i % 300 === 7 && message.deliveries === 1;
    await sleep(slow ? LEASE_MS * 2 : Math.random() * 3);
    out(`done ${i} ${message.deliveries}`);
  },
  {
    json: true,
    concurrency: 8,
    leaseMs: LEASE_MS,
    backoff: () => 50,
    pollTimeoutMs: 2000,
    onError: () => {},
    onAck: (messages) => {
      const now = Date.now();
      for (const message of messages) out(`acked ${(message.data as Job).i} ${now}`);
    },
  },
);
out(`ready ${name}`);
process.once("SIGTERM", () => {
  void worker.stop().then(() => {
    out("stopped");
    process.exit(0);
  });
});
await worker.done.catch((error: unknown) => {
  out(`fatal ${(error as Error).message}`);
  process.exit(1);
});
