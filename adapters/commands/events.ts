/**
 * A shared consumer's outcomes from a shell (docs/work-queues.md#outcomes): `events` follows them,
 * `outcome` waits for one message's end. On the files (`--dir`, `--storage`) they read the
 * consumer's outcome log without its lock, beside a running server; through a server (`--url`)
 * they use its event stream and outcome route.
 */
import { defineCommand } from "citty";
import type { OutcomeEvent } from "../../src/consumers/types";
import { followOutcomes, waitForOutcome } from "../../src/consumers/shared/outcomes";
import { parseCount, parseDuration } from "./_duration";
import { CliError, log, withStorage, targetArgs } from "./_shared";

const positional = {
  queue: { type: "positional", required: true, description: "The queue" },
  consumer: { type: "positional", required: true, description: "The shared consumer" },
} as const;

export const events = defineCommand({
  meta: {
    name: "events",
    description: "Follow a shared consumer's outcomes: completed (with results), failed, dead, progress; one line each, until Ctrl-C or --count",
  },
  args: {
    ...positional,
    from: { type: "string", description: "now (events from now on) or oldest (every event kept first) [default: now]", valueHint: "now|oldest" },
    after: { type: "string", description: "Resume after this cursor (as --json printed it)", valueHint: "cursor" },
    count: { type: "string", description: "Stop after this many events", valueHint: "n" },
    json: { type: "boolean", description: "One JSON object per event (with its cursor)" },
    ...targetArgs,
  },
  async run({ args }) {
    const from = args.from ?? "now";
    if (from !== "now" && from !== "oldest") throw new CliError(`Invalid --from ${JSON.stringify(from)}: use now or oldest.`);
    const count = args.count === undefined ? Infinity : parseCount("--count", args.count);
    if (args.url)
      throw new CliError("events reads the files (--dir, --storage); through a server, follow GET /api/v1/queues/{queue}/consumers/{consumer}/events.");
    const stop = new AbortController();
    process.once("SIGINT", () => stop.abort());
    let seen = 0;
    await withStorage(args, `Cannot follow the outcomes of ${args.queue} as ${args.consumer}`, async (driver) => {
      for await (const event of followOutcomes(args.queue, args.consumer, { driver, from, after: args.after, signal: stop.signal })) {
        console.log(args.json ? JSON.stringify(event) : describe(event));
        if (++seen >= count) break;
      }
    });
  },
});

export const outcome = defineCommand({
  meta: {
    name: "outcome",
    description: "Wait for a message's end in a shared consumer's outcomes (completed with its result, or dead); exit 1 if dead, 2 if none came in time",
  },
  args: {
    ...positional,
    message: {
      type: "positional",
      required: true,
      description: "The message: <part>.<offset>, or <partition>:<part>.<offset> on a partitioned queue",
      valueHint: "id",
    },
    wait: { type: "string", description: "Wait up to this long [default: 0, answer at once]", valueHint: "30s" },
    json: { type: "boolean", description: "Print the event as JSON" },
    ...targetArgs,
  },
  async run({ args }) {
    const message = parseMessage(args.message);
    const timeoutMs = args.wait === undefined ? 0 : parseDuration("--wait", args.wait);
    if (args.url)
      throw new CliError("outcome reads the files (--dir, --storage); through a server, use GET /api/v1/queues/{queue}/consumers/{consumer}/outcome.");
    const event = await withStorage(args, `Cannot read the outcomes of ${args.queue} as ${args.consumer}`, (driver) =>
      waitForOutcome(args.queue, args.consumer, message, { driver, timeoutMs }),
    );
    if (!event) {
      log.warn(`No end of ${args.message} in the outcomes of ${args.queue} as ${args.consumer}${timeoutMs ? ` within ${args.wait}` : ""}.`);
      process.exitCode = 2;
      return;
    }
    console.log(args.json ? JSON.stringify(event) : describe(event));
    if (event.kind === "dead") process.exitCode = 1;
  },
});

/** `<part>.<offset>` or `<partition>:<part>.<offset>`. */
function parseMessage(text: string): { part: number; offset: number; partition?: number } {
  const match = /^(?:(\d{1,6}):)?(\d{1,15})\.(\d{1,15})$/.exec(text);
  if (!match)
    throw new CliError(`Invalid message ${JSON.stringify(text)}: use <part>.<offset> (such as 0.1024), or <partition>:<part>.<offset> on a partitioned queue.`);
  return { part: Number(match[2]), offset: Number(match[3]), ...(match[1] !== undefined && { partition: Number(match[1]) }) };
}

/** One line: when, what, which message, and what it carries. */
function describe(event: OutcomeEvent): string {
  const where = `${event.partition === undefined ? "" : `${event.partition}:`}${event.part}.${event.offset}`;
  const value = event.kind === "completed" ? event.result : event.kind === "progress" ? event.progress : undefined;
  const extra = [
    value !== undefined && JSON.stringify(value),
    event.error !== undefined && `error: ${event.error}`,
    event.retryAt !== undefined && `again at ${new Date(event.retryAt).toISOString()}`,
  ].filter(Boolean);
  return [new Date(event.at).toISOString(), event.kind.padEnd(9), where, `delivery ${event.deliveries}`, ...extra].join("  ");
}
