/**
 * A second process for the tests: `node --import jiti/register test/helpers/child.ts <mode> <dir> ...`.
 * - `pusher <dir> <run> <workers> <maxPartBytes> [zstd [wasm|native]]`: pushes `<run>-<i>` with fsync durability from
 *   several concurrent loops, printing `ack <i>` once each push resolves, until killed
 *   (`zstd`: with compression, learning from the first 2 KiB of each part, with that zstd implementation).
 * - `hold-writer <dir> <queue>` / `hold-consumer <dir> <queue> <consumer>`: opens, prints `ready`, waits.
 * - `read-commit <dir> <queue> <consumer> <n>`: reads n messages, commits, prints them as JSON, exits.
 * - `push <dir> <queue> <message>`: pushes one message and exits.
 * - `prune <dir> <queue> <maxParts>`: applies retention once, prints its result as JSON, exits.
 * - `shared-worker <dir> <queue> <consumer>`: a shared consumer with fsync'd acks, polling and
 *   printing `got <body>` per message, acking two in three (then `ack <body>`), leaving the rest leased, until killed.
 * - `hold-shared <dir> <queue> <consumer>`: opens a shared consumer, prints `ready`, waits.
 * - `delay-pusher <dir> <queue> <count> <delayMs>`: produces `d<i>` delayed by `<delayMs>` plus 5 ms per i
 *   (fsync), printing `ack <i> <until>` for each, then `done`, and stays (moving them when due) until killed.
 * - `keyed-pusher <dir> <queue> <workers>`: produces `k<i>` with idempotency key `key-<i>` (fsync)
 *   from several loops, printing `ack <i>` for each, until killed.
 * - `lease-pusher <dir> <run> <leaseMs>`: a writer on unstorage over files in <dir> (a lease lock),
 *   pushing `<run>-<i>` one at a time, printing `ack <i>` or `err <code>` for each, until killed.
 */
import fsDriver from "../../adapters/drivers/fs";
import { QueueConsumer } from "../../src/consumers/ordered/consumer";
import { QueueWriter } from "../../src/writer/writer";
import { SharedConsumer } from "../../src/consumers/shared/consumer";
import { pruneQueue } from "../../src/retention/prune";
import { selectZstd, type ZstdChoice } from "../../adapters/zstd-native";
import { sleep } from "./sleep";

const [mode, dir, ...args] = process.argv.slice(2);
const driver = fsDriver({ dir: dir! });
const out = (line: string) => process.stdout.write(`${line}\n`);

switch (mode) {
  case "prune": {
    out(JSON.stringify(await pruneQueue(driver, args[0]!, { maxParts: Number(args[1]) })));
    break;
  }
  case "pusher": {
    const [run, workers, maxPartBytes, compression, impl = "wasm"] = args;
    const zstd = compression === "zstd" ? ({ compression: "zstd", compressionSampleBytes: 2048, zstd: selectZstd(impl as ZstdChoice) } as const) : {};
    const queue = await QueueWriter.open("crash", { driver, durability: "fsync", maxPartBytes: Number(maxPartBytes), onProblem: () => {}, ...zstd });
    out("ready");
    let next = 0;
    await Promise.all(
      Array.from({ length: Number(workers) }, async () => {
        for (;;) {
          const i = next++;
          await queue.push(`${run}-${i}-${"x".repeat(i % 200)}`);
          out(`ack ${i}`);
        }
      }),
    );
    break;
  }
  case "hold-writer": {
    await QueueWriter.open(args[0]!, { driver });
    out("ready");
    setInterval(() => {}, 1000);
    break;
  }
  case "hold-consumer": {
    await QueueConsumer.open(args[0]!, args[1]!, { driver });
    out("ready");
    setInterval(() => {}, 1000);
    break;
  }
  case "shared-worker": {
    const shared = await SharedConsumer.open(args[0]!, args[1]!, { driver, leaseMs: 60_000, onProblem: () => {} });
    out("ready");
    for (;;) {
      const batch = await shared.poll({ max: 4, timeoutMs: 100 });
      await Promise.all(
        batch.map(async (m) => {
          out(`got ${m.data as string}`);
          if (m.seq % 3 === 0) return;
          await shared.ack(m);
          out(`ack ${m.data as string}`);
        }),
      );
    }
  }
  case "hold-shared": {
    await SharedConsumer.open(args[0]!, args[1]!, { driver });
    out("ready");
    setInterval(() => {}, 1000);
    break;
  }
  case "read-commit": {
    const consumer = await QueueConsumer.open(args[0]!, args[1]!, { driver });
    const messages = await consumer.read({ max: Number(args[2]) });
    await consumer.commit();
    await consumer.close();
    out(JSON.stringify(messages.map((m) => m.data)));
    break;
  }
  case "push": {
    const queue = await QueueWriter.open(args[0]!, { driver });
    await queue.push(args[1]!);
    await queue.close();
    break;
  }
  case "lease-pusher": {
    const [run, leaseMs] = args;
    const { createStorage } = await import("unstorage");
    const { default: unstorageFs } = await import("unstorage/drivers/fs");
    const { default: unstorageDriver } = await import("../../adapters/drivers/unstorage");
    const leased = unstorageDriver({ storage: createStorage({ driver: unstorageFs({ base: dir! }) }), lockLeaseMs: Number(leaseMs) });
    const queue = await QueueWriter.open("lease", { driver: leased, durability: "fsync", onProblem: () => {} });
    out("ready");
    for (let i = 0; ; i++) {
      try {
        await queue.push(`${run}-${i}`);
        out(`ack ${i}`);
      } catch (error) {
        out(`err ${(error as { code?: string }).code ?? String(error)}`);
      }
      await sleep(5);
    }
  }
  case "delay-pusher": {
    const [queue, count, delayMs] = args;
    const writer = await QueueWriter.open(queue!, { driver, durability: "fsync", onProblem: () => {} });
    for (let i = 0; i < Number(count); i++) {
      const { until } = await writer.produce([`d${i}`], { delayMs: Number(delayMs) + 5 * i });
      out(`ack ${i} ${until}`);
    }
    out("done");
    setInterval(() => {}, 1000);
    break;
  }
  case "keyed-pusher": {
    const [queue, workers] = args;
    const writer = await QueueWriter.open(queue!, { driver, durability: "fsync", onProblem: () => {} });
    out("ready");
    let next = 0;
    await Promise.all(
      Array.from({ length: Number(workers) }, async () => {
        for (;;) {
          const i = next++;
          await writer.produce([`k${i}`], { key: `key-${i}` });
          out(`ack ${i}`);
        }
      }),
    );
    break;
  }
  default:
    throw new Error(`unknown mode ${mode}`);
}
