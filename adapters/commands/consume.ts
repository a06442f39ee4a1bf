import { defineCommand, type ArgsDef } from "citty";
import { consola } from "consola";
import { BATCH_CONTENT_TYPE, decodeBatch } from "../../runtime/index";
import { QueueConsumer } from "../../src/consumer";
import { cursorAfter } from "../../src/cursor";
import type { StartPosition } from "../../src/options";
import { CliError, explain, httpClient, openStorage, progress, storageLabel, targetArgs } from "./_shared";

interface Printable {
  part: number;
  offset: number;
  seq: number;
  type: "string" | "object";
  data: string | Uint8Array;
}

const consumeArgs = {
  queue: { type: "positional", description: "Queue name", required: true },
  max: { type: "string", description: "Stop after this many messages", valueHint: "n" },
  follow: { type: "boolean", alias: ["f"], description: "Keep waiting for new messages (Ctrl-C to stop)" },
  commit: { type: "boolean", description: "Commit what was printed (--no-commit to leave the position as it was)", default: true },
  json: { type: "boolean", description: "Print one JSON object per message (part, offset, seq, type, data, cursor)" },
  from: { type: "string", description: "Where a new consumer starts: earliest or latest", valueHint: "earliest|latest" },
  ...targetArgs,
} as const satisfies ArgsDef;

async function runConsume(args: Record<string, unknown>, consumer: string, defaults: { follow: boolean; from: StartPosition }): Promise<void> {
  const queue = args.queue as string;
  const max = args.max === undefined ? Number.POSITIVE_INFINITY : Number(args.max);
  if (!(max >= 1) || (Number.isFinite(max) && !Number.isInteger(max))) throw new CliError(`Invalid --max ${JSON.stringify(args.max)}: use a positive integer.`);
  const follow = (args.follow as boolean | undefined) ?? defaults.follow;
  const from = ((args.from as string | undefined) ?? defaults.from) as StartPosition;
  if (from !== "earliest" && from !== "latest") throw new CliError(`Invalid --from ${JSON.stringify(from)}: use earliest or latest.`);
  const commit = args.commit !== false;
  // A closed pipe (`| head`) ends the command; what was printed but not committed comes again.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    throw error;
  });
  const stop = new AbortController();
  const onSigint = () => stop.abort();
  process.once("SIGINT", onSigint);
  const bar = progress(`consume ${queue}/${consumer}`);
  let count = 0;
  const print = (m: Printable) => {
    const text = typeof m.data === "string" ? m.data : Buffer.from(m.data).toString("base64");
    if (args.json) {
      const cursor = cursorAfter({ ...m, size: typeof m.data === "string" ? Buffer.byteLength(m.data) : m.data.length });
      process.stdout.write(`${JSON.stringify({ part: m.part, offset: m.offset, seq: m.seq, type: m.type, data: text, ...(m.type === "object" ? { encoding: "base64" } : {}), cursor })}\n`);
    } else process.stdout.write(`${text}\n`);
    count++;
    bar.tick(count);
  };
  try {
    if (args.url) {
      const call = httpClient(args.url as string, args.user as string | undefined);
      const base = `/api/v1/queues/${encodeURIComponent(queue)}/consumers/${encodeURIComponent(consumer)}`;
      // A new session: what an earlier client was handed and did not commit comes again.
      const rewind = () =>
        call(`${base}/rewind`, { method: "POST" }).catch((error: Error) => {
          if (!/ 404 /.test(error.message)) throw error; // a new consumer: nothing to rewind
        });
      await rewind();
      // Each batch is committed by the next request (?commit=), the last one by a POST.
      let pending: string | null = null;
      while (count < max && !stop.signal.aborted) {
        const want = Math.min(1000, max - count);
        const commitParam: string = pending ? `&commit=${pending}` : "";
        const res: Response | undefined = await call(`${base}/messages?max_messages=${want}&timeout_ms=${follow ? 30_000 : 0}${commitParam}`, { headers: { accept: BATCH_CONTENT_TYPE }, signal: stop.signal }).catch((error: Error) => {
          if (error.name === "AbortError") return undefined;
          throw error;
        });
        if (!res) break;
        pending = null;
        const records = decodeBatch(new Uint8Array(await res.arrayBuffer()));
        for (const r of records) print(r);
        if (commit) pending = res.headers.get("x-vq-cursor");
        if (records.length === 0 && !follow) break;
      }
      if (pending) await call(`${base}/commit?cursor=${pending}`, { method: "POST" });
      // A peek leaves the server's consumer where it was.
      if (!commit) await rewind();
    } else {
      const driver = await openStorage(args);
      const reader = await QueueConsumer.open(queue, consumer, { driver, start: from, create: true }).catch(async (error: unknown) => {
        await driver.dispose?.();
        return explain(error, `Cannot open consumer "${consumer}" of "${queue}" in ${storageLabel(args)}`);
      });
      try {
        while (count < max && !stop.signal.aborted) {
          const batch = await reader.read({ max: Math.min(1000, max - count) });
          for (const m of batch) print(m);
          if (commit && batch.length > 0) await reader.commit(batch.at(-1));
          if (batch.length === 0) {
            if (!follow) break;
            await reader.wait({ signal: stop.signal });
          }
        }
      } finally {
        await reader.close();
        await driver.dispose?.();
      }
    }
  } finally {
    bar.done();
    process.off("SIGINT", onSigint);
  }
  consola.info(`${count} message${count === 1 ? "" : "s"} from ${queue} as ${consumer}${commit ? ", committed" : ", not committed"}.`);
}

export const consume = defineCommand({
  meta: { name: "consume", description: "Print a consumer's next messages (and commit them, unless --no-commit)" },
  args: { ...consumeArgs, consumer: { type: "positional", description: "Consumer name (created on first use)", required: true } },
  run: ({ args }) => runConsume(args, args.consumer, { follow: false, from: "earliest" }),
});

export const tail = defineCommand({
  meta: { name: "tail", description: "Follow a queue: print new messages as they come (consumer 'tail', starting at the latest)" },
  args: { ...consumeArgs, consumer: { type: "string", description: "Consumer name [default: tail]", valueHint: "name" } },
  run: ({ args }) => runConsume(args, args.consumer ?? "tail", { follow: true, from: "latest" }),
});
