import { randomBytes } from "node:crypto";
import { defineCommand } from "citty";
import { checkOption } from "../../src/core/check";
import { checkStart, type StartPosition } from "../../src/options/queue";
import { formatMessage } from "./_print";
import { CliError, log, plural, progress, targetArgs } from "./_shared";
import { openDirectSource, openHttpSource, HTTP_BATCH, type SourceOptions } from "./_source";

const queueArg = { type: "positional", description: "Queue name", required: true } as const;
const jsonArg = {
  type: "boolean",
  description: "One JSON object per message: part, offset, seq, type, data, cursor (bytes: type object, data in base64, encoding base64)",
} as const;

export const consume = defineCommand({
  meta: { name: "consume", description: "Print a consumer's next messages, all there are unless --max, and commit them; bytes print as base64:<data>" },
  args: {
    queue: queueArg,
    consumer: { type: "positional", description: "Consumer name (created on first use)", required: true },
    max: { type: "string", description: "Stop after this many messages [default: all there are; with --follow, never]", valueHint: "n" },
    follow: { type: "boolean", alias: ["f"], description: "Keep waiting for new messages (Ctrl-C to stop)" },
    // No `default: true`: citty would list --commit and --no-commit as two options.
    commit: { type: "boolean", description: "Commit what was printed (the default); --no-commit leaves the saved position as it was" },
    json: jsonArg,
    from: { type: "string", description: "Where a new consumer starts: earliest or latest [default: earliest]", valueHint: "earliest|latest" },
    ...targetArgs,
  },
  run: ({ args }) => {
    const from = (args.from ?? "earliest") as StartPosition;
    checkOption("--from", from, checkStart);
    return runRead(args, { queue: args.queue, consumer: args.consumer, from, follow: args.follow === true, commit: args.commit !== false, ephemeral: false });
  },
});

export const tail = defineCommand({
  meta: { name: "tail", description: "Follow a queue from its end: print new messages as they come (Ctrl-C to stop); keeps no position, any number can run" },
  args: {
    queue: queueArg,
    max: { type: "string", description: "Stop after this many messages [default: never]", valueHint: "n" },
    json: jsonArg,
    ...targetArgs,
  },
  // A throwaway consumer at the end of the queue, deleted on exit: `consume -f` keeps a position.
  run: ({ args }) =>
    runRead(args, {
      queue: args.queue,
      consumer: `tail.ephemeral.${randomBytes(6).toString("hex")}`,
      from: "latest" as StartPosition,
      follow: true,
      commit: false,
      ephemeral: true,
    }),
});

async function runRead(args: { max?: string; json?: boolean; url?: string; user?: string; dir?: string; storage?: string }, o: SourceOptions): Promise<void> {
  const max = args.max === undefined ? Number.POSITIVE_INFINITY : Number(args.max);
  if (!(max >= 1) || (Number.isFinite(max) && !Number.isInteger(max))) throw new CliError(`Invalid --max ${JSON.stringify(args.max)}: use a positive integer.`);
  // Ctrl-C, SIGTERM and a closed pipe (`| head`) end the loop, so that close runs: a pending
  // commit is sent, a tail's consumer deleted. What was not printed comes again.
  const stop = new AbortController();
  let broken = false;
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal).once("SIGTERM", onSignal);
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    broken = true;
    stop.abort();
  });
  const source = args.url ? await openHttpSource(args.url, args.user, o) : await openDirectSource(args, o);
  if (o.ephemeral) log.info(`Following ${o.queue} from its end (Ctrl-C to stop).`);
  const bar = progress(o.ephemeral ? `tail ${o.queue}` : `consume ${o.queue}/${o.consumer}`);
  let count = 0;
  try {
    while (count < max && !stop.signal.aborted) {
      const batch = await source.next(Math.min(HTTP_BATCH, max - count), stop.signal);
      if (batch.length === 0) break;
      process.stdout.write(batch.map((m) => formatMessage(m, args.json === true)).join(""));
      count += batch.length;
      bar.tick(count);
      if (o.commit && !broken) await source.commit();
    }
  } finally {
    bar.done();
    process.off("SIGINT", onSignal).off("SIGTERM", onSignal);
    await source.close();
  }
  if (o.ephemeral) log.info(`${plural(count, "message")} from ${o.queue}.`);
  else log.info(`${plural(count, "message")} from ${o.queue} as ${o.consumer}${o.commit ? ", committed" : ", not committed"}.`);
}
