import { createReadStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { defineCommand } from "citty";
import type { Compression, Durability } from "../../src/options";
import { QueueWriter } from "../../src/writer";
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
    ...targetArgs,
  },
  async run({ args }) {
    const words = (args._ as string[]).slice(1);
    const batchSize = Number(args.batch ?? 1000);
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000) throw new CliError(`Invalid --batch ${JSON.stringify(args.batch)}: use 1..100000.`);
    const fromStdin = args.stdin || (!args.file && words.length === 0 && !process.stdin.isTTY);
    if (!args.file && words.length === 0 && !fromStdin) throw new CliError("Nothing to push: give messages, --file PATH or --stdin.");

    const sink = args.url ? httpSink(args.url, args.user, args.queue) : await directSink(args, args.queue, (args.durability ?? "fsync") as Durability, (args.compression ?? "none") as Compression);
    const bar = progress(`push ${args.queue}`);
    let count = 0;
    try {
      const flush = async (batch: (string | Uint8Array)[]) => {
        if (batch.length === 0) return;
        await sink.write(batch);
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
    log.success(`Pushed ${plural(count, "message")} to ${args.queue}.`);
  },
});

interface Sink {
  write(batch: (string | Uint8Array)[]): Promise<void>;
  close(): Promise<void>;
}

async function directSink(target: { dir?: string; storage?: string }, queue: string, durability: Durability, compression: Compression): Promise<Sink> {
  const driver = await openStorage(target);
  const writer = await QueueWriter.open(queue, { driver, durability, compression, zstd: cliZstd }).catch(async (error: unknown) => {
    await driver.dispose?.();
    return explain(error, `Cannot open queue "${queue}" in ${storageLabel(target)}`);
  });
  return {
    write: async (batch) => {
      await writer.pushBatch(batch).catch((error: unknown) => explain(error, "Push failed"));
    },
    close: async () => {
      await writer.close();
      await driver.dispose?.();
    },
  };
}

function httpSink(url: string, user: string | undefined, queue: string): Sink {
  const client = apiClient(url, user);
  return {
    // Binary: text stays text and bytes stay bytes (JSON would make every message base64 once one is bytes).
    write: async (batch) => void (await client.produce(queue, batch, { format: "binary" })),
    close: async () => {},
  };
}
