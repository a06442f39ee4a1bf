/**
 * One instance of a partitioned queue for test/engine/partitioned-multi.test.ts, in its own process:
 * `node --import jiti/register test/helpers/partition-worker.ts <mode> <dir> <queue> <id> <ms>`.
 * It runs until `<ms>` have passed or the file `<dir>/stop~<id>` exists (a test stops it once
 * what it waits for happened, rather than guessing a run long enough on a loaded machine);
 * while `<dir>/hold~<id>` exists, a consumer waits after each batch (committed or acknowledged).
 * The driver's listings leave out names with a `~`.
 * - `writer`: a PartitionedWriter (fsync) for `<ms>`: two loops produce keyed messages
 *   `<id>:<key>:<n>` (loop L owns keys kL, kL+2, ... of k0-k7, shared by every writer, so
 *   partitions change hands), one loop produces unkeyed `<id>:-:<n>`. Prints `ack <message> <partition>`
 *   once acknowledged, `err <code>` for a refused produce; at the end `handed <n>` and `done`.
 * - `consumer`: a PartitionedConsumer named `readers` for `<ms>`: polls up to 10, prints
 *   `got <partition> <message>` for each, commits the batch, prints `committed`; at the end `handed <n>`, `done`.
 * - `shared`: a PartitionedSharedConsumer named `workers` for `<ms>`: leases up to 5, acks each,
 *   printing `ack <message>` once acknowledged, and `held <ms> <partitions>` each time the partitions
 *   it holds change (`<ms>`: the time); at the end `end <ms>` (before it lets go), `handed <n>`, `done`.
 */
import { existsSync } from "node:fs";
import { join } from "pathe";
import fsDriver from "../../adapters/drivers/fs";
import { PartitionedConsumer } from "../../src/consumers/ordered/partitioned";
import { PartitionedSharedConsumer } from "../../src/consumers/shared/partitioned";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { sleep } from "./sleep";

const [mode, dir, queue, id, ms] = process.argv.slice(2);
const driver = fsDriver({ dir: dir! });
const out = (line: string) => process.stdout.write(`${line}\n`);
const until = Date.now() + Number(ms);
const running = () => Date.now() < until && !existsSync(join(dir!, `stop~${id}`));
const hold = async () => {
  while (running() && existsSync(join(dir!, `hold~${id}`))) await sleep(20);
};
const quiet = { onProblem: () => {} };

switch (mode) {
  case "writer": {
    const writer = await PartitionedWriter.open(queue!, { driver, durability: "fsync", ...quiet });
    out("ready");
    const loop = async (keys: string[] | undefined) => {
      for (let n = 0; running(); n++) {
        const key = keys?.[n % keys.length];
        const message = `${id}:${key ?? "-"}:${n}`;
        try {
          const result = await writer.produce([message], key ? { partitionKey: key } : {});
          out(`ack ${message} ${result.partition}`);
        } catch (error) {
          out(`err ${(error as { code?: string }).code ?? String(error)}`);
        }
        if (n % 20 === 0) await sleep(5); // let the others in now and then
      }
    };
    await Promise.all([loop(["k0", "k2", "k4", "k6"]), loop(["k1", "k3", "k5", "k7"]), loop(undefined)]);
    out(`handed ${writer.handedOver}`);
    await writer.close();
    break;
  }
  case "consumer": {
    const consumer = await PartitionedConsumer.open(queue!, "readers", { driver, pollIntervalMs: 20, ...quiet });
    out("ready");
    while (running()) {
      const batch = await consumer.poll({ max: 10, timeoutMs: 100 });
      for (const message of batch) out(`got ${message.partition} ${message.data as string}`);
      if (batch.length === 0) continue;
      await sleep(15); // some work
      await consumer.commit(consumer.cursor);
      out("committed");
      await hold();
    }
    out(`handed ${consumer.handedOver}`);
    await consumer.close();
    break;
  }
  case "shared": {
    const shared = await PartitionedSharedConsumer.open(queue!, "workers", { driver, ...quiet });
    out("ready");
    let held = "";
    while (running()) {
      const batch = await shared.poll({ max: 5, timeoutMs: 100 });
      if (shared.held().join() !== held) out(`held ${Date.now()} ${(held = shared.held().join())}`);
      await sleep(15); // some work
      for (const lease of batch) {
        await shared.ack(lease);
        out(`ack ${lease.data as string}`);
      }
      if (batch.length > 0) await hold();
    }
    out(`end ${Date.now()}`);
    out(`handed ${shared.handedOver}`);
    await shared.close();
    break;
  }
  default:
    throw new Error(`unknown mode ${mode}`);
}
out("done");
