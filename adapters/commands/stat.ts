import { defineCommand } from "citty";
import { formatCursor } from "../../protocol/cursor";
import { inspectQueue, listQueues } from "../../src/inspect/queues";
import type { QueueStats } from "../../src/inspect/types";
import type { ConsumerInfo } from "../../protocol/api";
import type { ConsumerKind } from "../../src/consumers/kind";
import type { SharedFileStats } from "../../src/inspect/shared";
import { parseDuration } from "./_duration";
import { apiClient, CliError, explain, log, openStorage, plural, storageLabel, targetArgs } from "./_shared";
import { runWatch } from "./_watch";
import { directWatchSource, httpWatchSource } from "./_watch-source";

/**
 * What `stat --json` prints for each queue, on the files and through `--url` alike (the API
 * does not give each part's size, so neither does this: `parts` is how many there are).
 */
export interface QueueStat {
  name: string;
  /** The part being written, and the records in it. */
  currentPart: number;
  currentCount: number;
  parts: number;
  messages: number;
  bytes: number;
  /** A partitioned queue: its partition count (the numbers are summed over them; no single current part). */
  partitions?: number;
  /** The API's consumer fields (`count` is its `count_popped`: records read in `part`; a shared consumer's position is its ack floor). */
  consumers: (Pick<ConsumerInfo, "name" | "part" | "position" | "lag" | "cursor"> & { count: number; kind: ConsumerKind; shared?: SharedStat })[];
}

/**
 * A shared consumer's state, as far as the source knows it: the files (`--dir`) tell what is
 * pending, acked above the floor and the highest delivery count; only the server that holds the
 * consumer (`--url`) knows the leases running (`inFlight`).
 */
export type SharedStat = Partial<Omit<SharedFileStats, "oldestUnacked">> & {
  /** Live (`--url`, while the server holds it): leases running; `redelivered` and `deadLettered` then count since the server opened it. */
  inFlight?: number;
  oldestUnacked: { part: number; offset: number; seq: number; deliveries?: number } | null;
};

export const stat = defineCommand({
  meta: { name: "stat", description: "Show queues, their parts and consumers with their lag" },
  args: {
    queue: { type: "positional", required: false, description: "One queue (default: all)" },
    json: {
      type: "boolean",
      description:
        "Print JSON: [{ name, currentPart, currentCount, parts, messages, bytes, partitions?, consumers: [{ name, kind, part, position, count, lag, cursor, shared? }] }]; with --watch, one line per sample: { at, queues: [...], consumers? }",
    },
    watch: {
      type: "boolean",
      alias: "w",
      description: "Live: messages, bytes, parts, produce and consume rates, worst lag (with a queue: its consumers), every --interval until Ctrl-C",
    },
    interval: { type: "string", description: "With --watch: time between samples, 100ms to 1h (default 1s)", valueHint: "duration" },
    ...targetArgs,
  },
  async run({ args }) {
    if (args.interval !== undefined && !args.watch) throw new CliError("--interval goes with --watch.");
    if (args.watch) return watch(args);
    const stats = args.url ? await statOverHttp(args.url, args.user, args.queue) : await statDirect(args, args.queue);
    if (args.json) return console.log(JSON.stringify(stats, null, 2));
    if (stats.length === 0) return log.info(`No queues in ${args.url ?? storageLabel(args)}.`);
    for (const q of stats) {
      if (q.partitions !== undefined) {
        // Summed over the partitions: no single part or position to show.
        console.log(
          `${q.name}: ${plural(q.messages, "message")}, ${plural(q.bytes, "byte")} in ${plural(q.partitions, "partition")} (each one: ${q.name}.p<k>)`,
        );
        for (const c of q.consumers) console.log(`  consumer ${c.name} (${c.kind}): lag ${c.lag}`);
        continue;
      }
      console.log(
        `${q.name}: ${plural(q.messages, "message")}, ${plural(q.bytes, "byte")} in ${plural(q.parts, "part")} (current part ${q.currentPart}, ${plural(q.currentCount, "message")})`,
      );
      for (const c of q.consumers)
        console.log(
          `  consumer ${c.name} (${c.kind}): ${c.kind === "shared" ? "ack floor " : ""}part ${c.part}, position ${c.position}, read ${c.count} in part, lag ${c.lag}${c.shared ? `; ${describeShared(c.shared)}` : ""}`,
        );
    }
  },
});

/** Watch bounds: a sample more often than 100 ms is all I/O; hourly is the monitor's limit too. */
const MIN_INTERVAL_MS = 100;
const MAX_INTERVAL_MS = 3_600_000;

async function watch(args: { queue?: string; json?: boolean; interval?: string; url?: string; user?: string; dir?: string; storage?: string }): Promise<void> {
  const text = args.interval ?? "1s";
  const intervalMs = parseDuration("--interval", text, MAX_INTERVAL_MS);
  if (intervalMs < MIN_INTERVAL_MS) throw new CliError(`Invalid --interval ${JSON.stringify(text)}: at least ${MIN_INTERVAL_MS}ms.`);
  const source = args.url ? httpWatchSource(args.url, args.user, args.queue) : await directWatchSource(args, args.queue, intervalMs);
  await runWatch(source, { intervalMs, json: args.json === true, label: args.url ?? storageLabel(args), queue: args.queue });
}

async function statDirect(target: { dir?: string; storage?: string }, queue: string | undefined): Promise<QueueStat[]> {
  const driver = await openStorage(target);
  try {
    const names = queue ? [queue] : await listQueues(driver);
    const out: QueueStat[] = [];
    for (const name of names) {
      const q: QueueStats | undefined = await inspectQueue(driver, name).catch((error: unknown) => explain(error, "stat"));
      if (!q) throw new CliError(`Queue "${name}" not found in ${storageLabel(target)}.`);
      const consumers = q.consumers.map((c) => ({
        name: c.name,
        kind: c.kind,
        part: c.part,
        position: c.position,
        count: c.count,
        lag: c.lag,
        cursor: formatCursor(c),
        ...(c.shared ? { shared: c.shared } : {}),
      }));
      out.push({
        name: q.name,
        currentPart: q.currentPart,
        currentCount: q.currentCount,
        parts: q.parts.length,
        messages: q.messages,
        bytes: q.bytes,
        ...(q.partitions === undefined ? {} : { partitions: q.partitions }),
        consumers,
      });
    }
    return out;
  } finally {
    await driver.dispose?.();
  }
}

async function statOverHttp(url: string, user: string | undefined, queue: string | undefined): Promise<QueueStat[]> {
  const client = apiClient(url, user);
  const names = queue ? [queue] : (await client.queues()).queues;
  const out: QueueStat[] = [];
  for (const name of names) {
    const info = await client.queue(name);
    const { consumers } = await client.consumers(name);
    out.push({
      name: info.name,
      currentPart: info.id,
      currentCount: info.count_pushed,
      parts: info.parts,
      messages: info.messages,
      bytes: info.bytes,
      ...(info.partitions === undefined ? {} : { partitions: info.partitions }),
      consumers: consumers.map((c) => ({
        name: c.name,
        kind: c.kind,
        part: c.part,
        position: c.position,
        count: c.count_popped,
        lag: c.lag,
        cursor: c.cursor,
        ...sharedOf(c),
      })),
    });
  }
  return out;
}

/**
 * From the files: `2 pending (1 redelivered, at most 2 deliveries), 1 acked above the floor, 1 dead-lettered, oldest unacked 0.0 (seq 1, 2 deliveries)`.
 * Live, from the server that holds it: `1 in flight, 3 redeliveries and 1 dead-lettered since the server opened it, oldest unacked 0.0 (seq 1)`.
 */
function describeShared(s: SharedStat): string {
  const parts: string[] = [];
  if (s.inFlight !== undefined)
    parts.push(
      `${s.inFlight} in flight, ${s.redelivered ?? 0} ${s.redelivered === 1 ? "redelivery" : "redeliveries"} and ${s.deadLettered ?? 0} dead-lettered since the server opened it`,
    );
  else {
    parts.push(`${s.pending ?? 0} pending${s.pending ? ` (${s.redelivered ?? 0} redelivered, at most ${deliveries(s.maxDeliveries ?? 0)})` : ""}`);
    parts.push(`${s.ackedAboveFloor ?? 0} acked above the floor`, `${s.deadLettered ?? 0} dead-lettered`);
  }
  const o = s.oldestUnacked;
  parts.push(o ? `oldest unacked ${o.part}.${o.offset} (seq ${o.seq}${o.deliveries === undefined ? "" : `, ${deliveries(o.deliveries)}`})` : "none unacked");
  return parts.join(", ");
}

const deliveries = (n: number): string => `${n} ${n === 1 ? "delivery" : "deliveries"}`;

/** A shared consumer's live stats, when the server holds it (the API's consumer list). */
function sharedOf(c: ConsumerInfo): { shared?: SharedStat } {
  // Live stats only while the server holds the consumer open.
  if (c.kind !== "shared" || c.inFlight === undefined) return {};
  return { shared: { inFlight: c.inFlight, redelivered: c.redelivered, deadLettered: c.deadLettered, oldestUnacked: c.oldestUnacked ?? null } };
}
