/**
 * Dead letters from a shell: `dlq` lists them without consuming them (a throwaway consumer,
 * removed after), `redrive` moves them back. Both on the files and through a server.
 */
import { randomBytes } from "node:crypto";
import { defineCommand } from "citty";
import { VQueueClientError, type VQueueClient } from "../../client/index";
import { parseDeadLetter, redrive as redriveFiles } from "../../src/consumers/shared/dead-letter";
import { listQueues } from "../../src/inspect/queues";
import { parseCount } from "./_duration";
import type { Printable } from "./_print";
import { apiClient, CliError, log, plural, requireYes, storageLabel, targetArgs, withStorage, yesArg } from "./_shared";
import { HTTP_BATCH, openDirectSource } from "./_source";

const PREVIEW_CHARS = 80;

export const dlq = defineCommand({
  meta: {
    name: "dlq",
    description:
      "List the dead letters of a queue (its <queue>.dead; a partitioned queue: each partition's <queue>.p<k>.dead) or of a dead-letter queue, oldest first, without consuming them",
  },
  args: {
    queue: { type: "positional", required: true, description: "A queue (its dead-letter queue <queue>.dead is read when there is one) or a dead-letter queue" },
    max: { type: "string", description: "Most to list [default: 100]", valueHint: "n" },
    json: {
      type: "boolean",
      description:
        "One JSON object per message: part, offset, seq (in the dead-letter queue), origin {queue, consumer, part, offset, seq}, deliveries, error, at, type, data (the whole original body; bytes in base64)",
    },
    ...targetArgs,
  },
  async run({ args }) {
    const max = args.max === undefined ? 100 : parseCount("--max", args.max);
    const client = args.url ? apiClient(args.url, args.user) : undefined;
    const exists = client
      ? (queue: string) => queueOverHttp(client, queue)
      : async (queue: string) => withStorage(args, "dlq", async (driver) => (await listQueues(driver)).includes(queue));
    let names = (await exists(`${args.queue}.dead`)) ? [`${args.queue}.dead`] : [];
    // A partitioned queue's shared consumers dead-letter to each partition's own <queue>.p<k>.dead.
    if (names.length === 0)
      names = partitionDeadQueues(args.queue, client ? (await client.queues()).queues : await withStorage(args, "dlq", (driver) => listQueues(driver)));
    if (names.length === 0 && (await exists(args.queue))) names = [args.queue];
    if (names.length === 0)
      throw new CliError(`Neither "${args.queue}.dead" nor "${args.queue}" exists in ${args.url ?? storageLabel(args)}: no dead letters.`);
    let listed = 0;
    for (const name of names) {
      if (listed >= max) break;
      const messages = client ? await peekOverHttp(client, name, max - listed) : await peekFiles(args, name, max - listed);
      process.stdout.write(messages.map((m) => formatLetter(m, args.json === true, names.length > 1 ? name : undefined)).join(""));
      listed += messages.length;
    }
    const where = names.length > 1 ? `${names.length} dead-letter queues (${names[0]} to ${names.at(-1)})` : names[0];
    log.info(`${plural(listed, "message")} in ${where}${listed === max ? " (there may be more: --max)" : ""}.`);
  },
});

export const redrive = defineCommand({
  meta: { name: "redrive", description: "Move dead letters back, as their original bodies, to their origin queue or --to (needs --yes)" },
  args: {
    dlq: { type: "positional", required: true, description: "The dead-letter queue, such as orders.dead" },
    to: { type: "string", description: "The queue they go to [default: each one's origin queue]", valueHint: "queue" },
    max: { type: "string", description: "Most to move [default: all]", valueHint: "n" },
    ...yesArg,
    ...targetArgs,
  },
  async run({ args }) {
    const max = args.max === undefined ? Number.POSITIVE_INFINITY : parseCount("--max", args.max, Number.MAX_SAFE_INTEGER);
    requireYes(args.yes, `move the messages of "${args.dlq}" to ${args.to ? `"${args.to}"` : "their origin queues"}`);
    const move = args.url
      ? (n: number) =>
          apiClient(args.url!, args.user)
            .redrive(args.dlq, { to: args.to, max: n })
            .then((r) => r.moved)
      : (n: number) => withStorage(args, `Cannot redrive "${args.dlq}"`, (driver) => redriveFiles(driver, args.dlq, args.to, { max: n }));
    // In calls of at most HTTP_BATCH: each one is durable on its own, and a server takes that many.
    let moved = 0;
    for (;;) {
      const want = Math.min(HTTP_BATCH, max - moved);
      const got = await move(want);
      moved += got;
      if (got < want || moved >= max) break;
    }
    log.success(
      `Moved ${plural(moved, "message")} from "${args.dlq}" to ${args.to ? `"${args.to}"` : "their origin queues"}${args.url ? "" : ` in ${storageLabel(args)}`}.`,
    );
  },
});

/** Whether the server has the queue. */
async function queueOverHttp(client: VQueueClient, queue: string): Promise<boolean> {
  try {
    await client.queue(queue);
    return true;
  } catch (error) {
    if (error instanceof VQueueClientError && (error.code === "E_NOT_FOUND" || error.code === "E_NAME")) return false;
    throw error;
  }
}

const throwaway = () => `dlq.ephemeral.${randomBytes(6).toString("hex")}`;

/** A peek on the files: a throwaway consumer from the oldest message, never committed, removed on close. */
async function peekFiles(target: { dir?: string; storage?: string }, queue: string, max: number): Promise<Printable[]> {
  const source = await openDirectSource(target, { queue, consumer: throwaway(), from: "earliest", follow: false, commit: false, ephemeral: true });
  const out: Printable[] = [];
  try {
    while (out.length < max) {
      const got = await source.next(max - out.length, new AbortController().signal);
      if (got.length === 0) break;
      out.push(...got);
    }
    return out;
  } finally {
    await source.close();
  }
}

/** A peek through a server: a throwaway consumer moved to the oldest message (whatever the server's `start`), read, then deleted. */
async function peekOverHttp(client: VQueueClient, queue: string, max: number): Promise<Printable[]> {
  const consumer = throwaway();
  try {
    await client.consume(queue, consumer, { maxMessages: 1, timeoutMs: 0 }); // creates it
    await client.seek(queue, consumer, "earliest");
    const out: Printable[] = [];
    while (out.length < max) {
      const got = await client.consume(queue, consumer, { format: "binary", maxMessages: Math.min(HTTP_BATCH, max - out.length), timeoutMs: 0 });
      if (got.messages.length === 0) break;
      out.push(...got.messages);
    }
    return out;
  } finally {
    await client.deleteConsumer(queue, consumer).catch(() => {});
  }
}

/** The dead-letter queues of `queue`'s partitions among `names`, in partition order. */
function partitionDeadQueues(queue: string, names: string[]): string[] {
  const partitionOf = (name: string) =>
    name.startsWith(`${queue}.p`) && name.endsWith(".dead") ? /^\d{1,4}$/.exec(name.slice(queue.length + 2, -5))?.[0] : undefined;
  return names.filter((name) => partitionOf(name) !== undefined).sort((a, b) => Number(partitionOf(a)) - Number(partitionOf(b)));
}

/**
 * One dead letter as a line: where it came from, deliveries, when, the error, a preview of its
 * body; `queue`: the dead-letter queue it is in, when several are listed.
 */
function formatLetter(m: Printable, json: boolean, queue?: string): string {
  const letter = typeof m.data === "string" ? parseDeadLetter({ ...m, size: 0, crc: 0 }) : undefined;
  if (json) {
    const data = typeof m.data === "string" ? m.data : Buffer.from(m.data).toString("base64");
    const from = queue === undefined ? {} : { queue };
    return `${JSON.stringify(letter ? { ...from, part: m.part, offset: m.offset, seq: m.seq, origin: letter.origin, deliveries: letter.deliveries, error: letter.error ?? null, at: new Date(letter.at).toISOString(), type: letter.type, data: letter.data } : { ...from, part: m.part, offset: m.offset, seq: m.seq, origin: null, type: m.type, data })}\n`;
  }
  const where = `${queue === undefined ? "" : `${queue} `}${m.part}.${m.offset}`;
  if (!letter) return `${where} (no dead letter) ${preview(typeof m.data === "string" ? m.data : `base64:${Buffer.from(m.data).toString("base64")}`)}\n`;
  const { origin } = letter;
  const body = letter.type === "object" ? `base64:${letter.data}` : letter.data;
  return `${where} from ${origin.queue}/${origin.consumer} ${origin.part}.${origin.offset} (seq ${origin.seq}), ${letter.deliveries} ${letter.deliveries === 1 ? "delivery" : "deliveries"}, ${new Date(letter.at).toISOString()}${letter.error ? `, error: ${oneLine(letter.error)}` : ""}: ${preview(body)}\n`;
}

const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim();
const preview = (text: string): string => {
  const line = oneLine(text);
  return line.length > PREVIEW_CHARS ? `${line.slice(0, PREVIEW_CHARS)}…` : line;
};
