/**
 * Shared consumers from a shell: `lease`, `ack`, `nack`, `extend`, `backoff`. A lease lives in the memory
 * of the process that holds the consumer (its lock), so these go through a server (`--url`);
 * on the files (`--dir`) only `lease --ack` makes sense: it takes messages for good.
 */
import { defineCommand } from "citty";
import { openSharedConsumer } from "../../src/consumers/shared/consumer";
import { parseCount, parseDuration } from "./_duration";
import { formatLeased } from "./_print";
import { apiClient, cliZstd, CliError, explain, log, openStorage, plural, storageLabel, targetArgs } from "./_shared";
import type { LeaseErrorJSON } from "../../protocol/api";
import { parseLeaseToken } from "../../protocol/binary";

const positional = {
  queue: { type: "positional", required: true, description: "The queue" },
  consumer: { type: "positional", required: true, description: "The shared consumer (created on first lease)" },
} as const;
const leasesArg = { type: "positional", required: true, description: "Lease tokens <part>.<offset>.<lease>, as lease printed them (one or more)" } as const;

const NOT_HERE =
  "A lease lives in the memory of the process that holds the shared consumer: from a shell, lease, ack, nack and extend go through a server (--url http://127.0.0.1:9093).";

export const lease = defineCommand({
  meta: {
    name: "lease",
    description: "Lease messages of a shared consumer through a server (--url): prints each with its lease token, to ack, nack or extend",
  },
  args: {
    ...positional,
    max: { type: "string", description: "Most messages to lease [default: 10]", valueHint: "n" },
    lease: { type: "string", description: "How long they stay yours unless extended [default: the consumer's, 30s]", valueHint: "30s" },
    wait: { type: "string", description: "Wait up to this long for the first message [default: 0, answer at once]", valueHint: "5s" },
    json: {
      type: "boolean",
      description: "One JSON object per message: part, offset, seq, type, data (bytes: base64 with encoding), lease, deliveries, leaseUntil",
    },
    ack: { type: "boolean", description: "Take the messages for good: acknowledge them once printed (the one mode on --dir)" },
    ...targetArgs,
  },
  async run({ args }) {
    const max = args.max === undefined ? 10 : parseCount("--max", args.max);
    const leaseMs = args.lease === undefined ? undefined : parseDuration("--lease", args.lease);
    const timeoutMs = args.wait === undefined ? 0 : parseDuration("--wait", args.wait);
    if (!args.url && !args.ack) throw new CliError(`${NOT_HERE}\nOn the files, "lease --ack" takes messages for good (acknowledged once printed).`);
    const got = args.url
      ? await leaseOverHttp(args.url, args.user, args.queue, args.consumer, { max, leaseMs, timeoutMs, ack: args.ack === true, json: args.json === true })
      : await leaseDirect(args, args.queue, args.consumer, { max, leaseMs, timeoutMs, json: args.json === true });
    const what = `${plural(got, "message")} of ${args.queue} as ${args.consumer}`;
    log.info(
      args.ack ? `${what}, acknowledged.` : got === 0 ? `No message to lease: ${what}.` : `Leased ${what}: ack, nack or extend each by its lease token.`,
    );
  },
});

interface LeaseFlags {
  max: number;
  leaseMs: number | undefined;
  timeoutMs: number;
  json: boolean;
}

async function leaseOverHttp(url: string, user: string | undefined, queue: string, consumer: string, o: LeaseFlags & { ack: boolean }): Promise<number> {
  const client = apiClient(url, user);
  const messages = await client.lease(queue, consumer, { max: o.max, leaseMs: o.leaseMs, timeoutMs: o.timeoutMs });
  process.stdout.write(messages.map((m) => formatLeased(m, o.json)).join(""));
  if (o.ack && messages.length > 0)
    reportErrors(
      "ack",
      await client.ack(
        queue,
        consumer,
        messages.map((m) => m.lease),
      ),
    );
  return messages.length;
}

/** On the files: opens the shared consumer here (its lock: refused while a server holds it), leases, prints, acks, closes. */
async function leaseDirect(target: { dir?: string; storage?: string }, queue: string, name: string, o: LeaseFlags): Promise<number> {
  const driver = await openStorage(target);
  try {
    const consumer = await openSharedConsumer(queue, name, { driver, zstd: cliZstd, start: "earliest" }).catch((error: unknown) =>
      explain(error, `Cannot open shared consumer "${name}" of "${queue}" in ${storageLabel(target)}`),
    );
    try {
      const messages = await consumer.poll({ max: o.max, leaseMs: o.leaseMs, timeoutMs: o.timeoutMs });
      process.stdout.write(messages.map((m) => formatLeased({ ...m, lease: `${m.part}.${m.offset}.${m.lease}` }, o.json)).join(""));
      await Promise.all(messages.map((m) => consumer.ack(m)));
      return messages.length;
    } finally {
      await consumer.close();
    }
  } finally {
    await driver.dispose?.();
  }
}

export const ack = defineCommand({
  meta: { name: "ack", description: "Acknowledge leased messages of a shared consumer through a server (--url): done, never handed out again" },
  args: { ...positional, leases: leasesArg, ...targetArgs },
  async run({ args }) {
    const client = apiClient(requireUrl(args.url), args.user);
    reportErrors("ack", await client.ack(args.queue, args.consumer, leaseTokens(args)));
  },
});

export const nack = defineCommand({
  meta: {
    name: "nack",
    description:
      "Give leased messages back through a server (--url): they come again (after --delay), or go to the dead-letter queue (--dead, or after maxDeliveries)",
  },
  args: {
    ...positional,
    leases: leasesArg,
    delay: { type: "string", description: "They come again after this long [default: at once]", valueHint: "10s" },
    error: { type: "string", description: "Why they failed: kept with a dead letter", valueHint: "text" },
    dead: { type: "boolean", description: "Send them to the dead-letter queue now" },
    ...targetArgs,
  },
  async run({ args }) {
    const delayMs = args.delay === undefined ? undefined : parseDuration("--delay", args.delay);
    const client = apiClient(requireUrl(args.url), args.user);
    reportErrors(
      "nack",
      await client.nack(args.queue, args.consumer, leaseTokens(args), { delayMs, error: args.error, deadLetter: args.dead === true ? true : undefined }),
    );
  },
});

export const extend = defineCommand({
  meta: { name: "extend", description: "Keep leased messages longer through a server (--url): each lease ends --lease from now" },
  args: {
    ...positional,
    leases: leasesArg,
    lease: { type: "string", description: "The new lease time, from now [default: the consumer's, 30s]", valueHint: "30s" },
    ...targetArgs,
  },
  async run({ args }) {
    const leaseMs = args.lease === undefined ? undefined : parseDuration("--lease", args.lease);
    const client = apiClient(requireUrl(args.url), args.user);
    const result = await client.extend(args.queue, args.consumer, leaseTokens(args), { leaseMs });
    for (const e of result.extended) console.log(`${e.lease} ${new Date(e.leaseUntil).toISOString()}`);
    reportErrors("extend", { extended: result.extended.length, errors: result.errors });
  },
});

export const backoff = defineCommand({
  meta: {
    name: "backoff",
    description: "Back a shared consumer off through a server (--url): no leases to any worker for this long (a downstream API asked to slow down)",
  },
  args: {
    ...positional,
    duration: { type: "positional", required: true, description: "How long, with a unit: 500ms, 30s, 5m" },
    ...targetArgs,
  },
  async run({ args }) {
    const delayMs = parseDuration("duration", args.duration);
    const client = apiClient(requireUrl(args.url), args.user);
    const { limitedUntil } = await client.backOff(args.queue, args.consumer, delayMs);
    log.info(`Shared consumer ${args.consumer} of ${args.queue} hands nothing out until ${new Date(limitedUntil).toISOString()}.`);
  },
});

function requireUrl(url: string | undefined): string {
  if (!url) throw new CliError(NOT_HERE);
  return url;
}

/** The lease tokens of the positionals (citty gives the first; the rest are in `_`), checked. */
function leaseTokens(args: { leases: string; _: string[] }): string[] {
  const tokens = args._.slice(2);
  if (tokens.length === 0) tokens.push(args.leases);
  for (const token of tokens)
    if (!parseLeaseToken(token))
      throw new CliError(`Invalid lease ${JSON.stringify(token)}: use a token <part>.<offset>.<lease> as lease printed it, such as 0.26.3.`);
  return tokens;
}

/** `Acked 2 leases.`, each failed one on its own line; exit code 1 when any failed. */
function reportErrors(verb: "ack" | "nack" | "extend", result: { acked?: number; nacked?: number; extended?: number; errors: LeaseErrorJSON[] }): void {
  const done = result.acked ?? result.nacked ?? result.extended ?? 0;
  const past = { ack: "Acknowledged", nack: "Gave back", extend: "Extended" }[verb];
  log.info(`${past} ${plural(done, "lease")}.`);
  for (const e of result.errors) log.error(`${e.lease}: ${e.message} (${e.code})`);
  if (result.errors.length > 0) process.exitCode = 1;
}
