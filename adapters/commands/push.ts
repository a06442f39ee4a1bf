import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { defineCommand } from "citty";
import type { Compression, Durability } from "../../src/options/queue";
import { attributeProblems, type MessageAttributes } from "../../src/format/attributes";
import { QueueWriter } from "../../src/writer/writer";
import { PartitionedWriter } from "../../src/writer/partitioned";
import { readPartitions } from "../../src/partitions/declaration";
import { checkKey } from "../../src/writer/idempotency";
import { MAX_DELAY_MS, parseAt } from "../../src/writer/produce";
import { apiClient, cliZstd, CliError, explain, log, openStorage, plural, progress, storageLabel, targetArgs } from "./_shared";

export const push = defineCommand({
  meta: { name: "push", description: "Push messages: the arguments (one message each), a file (--file), or stdin lines (--stdin)" },
  args: {
    queue: { type: "positional", description: "Queue name (created if missing)", required: true },
    messages: { type: "positional", description: "Text messages", required: false },
    file: { type: "string", description: "Push the file's content as one message (bytes; with --text as text)", valueHint: "path" },
    text: { type: "boolean", description: "With --file: store the content as text (S) rather than bytes (O)" },
    stdin: { type: "boolean", description: "Push each line of stdin as a text message (the default when stdin is piped and nothing else is given)" },
    batch: { type: "string", description: "Messages per write (or request) [default: 1000]", valueHint: "n" },
    durability: { type: "string", description: "Direct mode: fsync, interval or none [default: fsync]", valueHint: "mode" },
    compression: { type: "string", description: "Direct mode: none or zstd (new parts compressed, v3) [default: none]", valueHint: "codec" },
    delay: { type: "string", description: "Deliver no earlier than this from now: ms, or with a unit (30s, 5m, 2h, 1d; at most a year)", valueHint: "time" },
    at: { type: "string", description: "Deliver no earlier than this time: ISO 8601 or ms since the epoch", valueHint: "time" },
    key: {
      type: "string",
      description: "Idempotency key: pushed once within the server's key window, however often run (the n-th batch of a long input gets <key>:<n>)",
      valueHint: "key",
    },
    "partition-key": { type: "string", description: "A partitioned queue: every message to this key's partition, in order", valueHint: "key" },
    priority: { type: "string", description: "0 to 255: shared consumers lease messages of a higher priority first", valueHint: "n" },
    group: { type: "string", description: "A group: shared consumers lease its messages in order, one at a time by default", valueHint: "name" },
    "max-deliveries": {
      type: "string",
      description: "Deliveries to a shared consumer before the dead-letter queue, instead of the consumer's",
      valueHint: "n",
    },
    backoff: {
      type: "string",
      description: "The wait before a failed delivery comes again: fixed:<time> or exponential:<time> (ms, or 500ms, 2s, 1m)",
      valueHint: "kind:time",
    },
    ...targetArgs,
  },
  async run({ args }) {
    const words = (args._ as string[]).slice(1);
    const batchSize = Number(args.batch ?? 1000);
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000)
      throw new CliError(`Invalid --batch ${JSON.stringify(args.batch)}: use 1..100000.`);
    const fromStdin = args.stdin || (!args.file && words.length === 0 && !process.stdin.isTTY);
    if (!args.file && words.length === 0 && !fromStdin) throw new CliError("Nothing to push: give messages, --file PATH or --stdin.");
    const extras = produceArgs(args);

    const sink = args.url
      ? httpSink(args.url, args.user, args.queue, extras)
      : await directSink(args, args.queue, (args.durability ?? "fsync") as Durability, (args.compression ?? "none") as Compression, extras);
    const bar = progress(`push ${args.queue}`);
    let count = 0;
    // Batches whose key the storage had already accepted: nothing written for them.
    let replayed = 0;
    try {
      const flush = async (batch: (string | Uint8Array)[]) => {
        if (batch.length === 0) return;
        if (await sink.write(batch)) replayed += batch.length;
        count += batch.length;
        bar.tick(count);
      };
      if (words.length > 0) await flush(words);
      if (args.file) {
        const content = await readFile(args.file).catch((error: NodeJS.ErrnoException) => {
          throw new CliError(`Cannot read ${args.file}: ${error.code ?? error.message}`);
        });
        await flush([args.text ? content.toString("utf8") : new Uint8Array(content)]);
      }
      if (fromStdin) {
        let batch: string[] = [];
        for await (const line of createInterface({ input: createReadStream("", { fd: 0 }), crlfDelay: Infinity })) {
          batch.push(line);
          if (batch.length >= batchSize) {
            await flush(batch);
            batch = [];
          }
        }
        await flush(batch);
      }
    } finally {
      bar.done();
      await sink.close();
    }
    const delayed = sink.until === undefined ? "" : `, delayed until ${new Date(sink.until).toISOString()}`;
    if (replayed === 0) return log.success(`Pushed ${plural(count, "message")} to ${args.queue}${delayed}.`);
    const already = `already pushed under key ${JSON.stringify(args.key)} (nothing written again)`;
    if (replayed === count) return log.info(`${plural(count, "message")} to ${args.queue}: ${already}.`);
    log.success(`Pushed ${plural(count - replayed, "message")} to ${args.queue}${delayed}; ${plural(replayed, "message")} ${already}.`);
  },
});

interface Sink {
  /** True when the batch's key was accepted before: nothing written. */
  write(batch: (string | Uint8Array)[]): Promise<boolean>;
  close(): Promise<void>;
  /** When delayed messages enter the queue (the last batch's). */
  until?: number;
}

/** `--delay`, `--at`, `--key` and `--partition-key`, checked; `keyOf(n)` is the n-th batch's key. */
interface PushExtras {
  delayMs?: number;
  at?: string;
  partitionKey?: string;
  /** `--priority`, `--max-deliveries`, `--backoff`. */
  attributes: MessageAttributes;
  keyOf(batch: number): string | undefined;
}

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

function produceArgs(args: {
  delay?: string;
  at?: string;
  key?: string;
  "partition-key"?: string;
  priority?: string;
  "max-deliveries"?: string;
  backoff?: string;
  group?: string;
}): PushExtras {
  if (args.delay !== undefined && args.at !== undefined) throw new CliError("Give --delay or --at, not both.");
  let delayMs: number | undefined;
  if (args.delay !== undefined) {
    const match = /^(\d+)(ms|s|m|h|d)?$/.exec(args.delay.trim());
    delayMs = match ? Number(match[1]) * UNITS[match[2] ?? "ms"]! : Number.NaN;
    if (!Number.isSafeInteger(delayMs) || delayMs > MAX_DELAY_MS)
      throw new CliError(`Invalid --delay ${JSON.stringify(args.delay)}: use ms or a number with a unit (30s, 5m, 2h, 1d), at most a year.`);
  }
  if (args.at !== undefined) {
    try {
      parseAt(args.at, "--at");
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  }
  const key = args.key;
  if (key !== undefined) {
    const problem = checkKey(key, "--key");
    if (problem) throw new CliError(problem);
  }
  const partitionKey = args["partition-key"];
  if (partitionKey !== undefined && partitionKey.length === 0) throw new CliError("Invalid --partition-key: give a non-empty key.");
  return {
    delayMs,
    at: args.at,
    partitionKey,
    attributes: attributeArgs(args),
    keyOf: (n) => (key === undefined ? undefined : n === 0 ? key : `${key}:${n + 1}`),
  };
}

/** `--priority`, `--max-deliveries` and `--backoff`, checked as the engine checks them. */
function attributeArgs(args: { priority?: string; "max-deliveries"?: string; backoff?: string; group?: string }): MessageAttributes {
  const number = (value: string | undefined) => (value === undefined ? undefined : /^\d+$/.test(value.trim()) ? Number(value) : value);
  const given: Record<string, unknown> = { priority: number(args.priority), maxDeliveries: number(args["max-deliveries"]), group: args.group };
  if (args.backoff !== undefined) {
    const match = /^(\w+):(\d+)(ms|s|m|h)?$/.exec(args.backoff.trim());
    if (!match) throw new CliError(`Invalid --backoff ${JSON.stringify(args.backoff)}: use fixed:<time> or exponential:<time> (500, 500ms, 2s, 1m).`);
    given.backoff = { type: match[1], delayMs: Number(match[2]) * UNITS[match[3] ?? "ms"]! };
  }
  const problems = attributeProblems(given).map((problem) =>
    problem.replace(/^Invalid (\w+)/, (_, name: string) => `Invalid --${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`),
  );
  if (problems.length > 0) throw new CliError(problems.join(" "));
  return Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) as MessageAttributes;
}

async function directSink(
  target: { dir?: string; storage?: string },
  queue: string,
  durability: Durability,
  compression: Compression,
  extras: PushExtras,
): Promise<Sink> {
  const driver = await openStorage(target);
  // A partitioned queue: its partitions' writers (each taken from another holder on request).
  const partitioned = (await readPartitions(driver, queue).catch(() => undefined)) !== undefined;
  if (!partitioned && extras.partitionKey !== undefined) {
    await driver.dispose?.();
    throw new CliError(`Queue "${queue}" is not partitioned: --partition-key is for a partitioned queue (v-queue create ${queue} --partitions P).`);
  }
  const options = { driver, durability, compression, zstd: cliZstd };
  const writer = await (partitioned ? PartitionedWriter.open(queue, options) : QueueWriter.open(queue, options)).catch(async (error: unknown) => {
    await driver.dispose?.();
    return explain(error, `Cannot open queue "${queue}" in ${storageLabel(target)}`);
  });
  let batches = 0;
  const sink: Sink = {
    write: async (batch) => {
      const key = extras.keyOf(batches++);
      if (writer instanceof PartitionedWriter) {
        const result = await writer
          .produce(batch, { key, delayMs: extras.delayMs, at: extras.at, partitionKey: extras.partitionKey, ...extras.attributes })
          .catch((error: unknown) => explain(error, "Push failed"));
        sink.until = result.until;
        return result.replayed;
      }
      if (key === undefined && extras.delayMs === undefined && extras.at === undefined && Object.keys(extras.attributes).length === 0) {
        await writer.pushBatch(batch).catch((error: unknown) => explain(error, "Push failed"));
        return false;
      }
      const result = await writer
        .produce(batch, { key, delayMs: extras.delayMs, at: extras.at, ...extras.attributes })
        .catch((error: unknown) => explain(error, "Push failed"));
      sink.until = result.until;
      return result.replayed;
    },
    close: async () => {
      await writer.close();
      await driver.dispose?.();
    },
  };
  return sink;
}

function httpSink(url: string, user: string | undefined, queue: string, extras: PushExtras): Sink {
  const client = apiClient(url, user);
  let batches = 0;
  const sink: Sink = {
    // Binary: text stays text and bytes stay bytes (JSON would make every message base64 once one is bytes).
    write: async (batch) => {
      const answer = await client.produce(queue, batch, {
        format: "binary",
        delayMs: extras.delayMs,
        at: extras.at,
        idempotencyKey: extras.keyOf(batches++),
        partitionKey: extras.partitionKey,
        ...extras.attributes,
      });
      if ("delayed" in answer) sink.until = answer.delayed.untilMs;
      return answer.replayed;
    },
    close: async () => {},
  };
  return sink;
}
