import { defineCommand } from "citty";
import type { SeekRequest } from "../../protocol/api";
import { isCursor } from "../../protocol/cursor";
import { openOrderedConsumer } from "../../src/open-consumer";
import { apiClient, cliZstd, CliError, explain, log, openStorage, storageLabel, targetArgs } from "./_shared";

export const seek = defineCommand({
  meta: {
    name: "seek",
    description: "Move a consumer, and save it there: to the oldest message, the end, a cursor, a message by part and sequence, or a time",
  },
  args: {
    queue: { type: "positional", required: true, description: "The queue" },
    consumer: { type: "positional", required: true, description: "The consumer (created if missing)" },
    to: {
      type: "positional",
      required: true,
      description:
        "earliest, latest, a cursor <part>.<position>.<count>, <part>:<seq> (that message comes next), or time:<ISO date or ms> (every message from then on, and up to indexInterval before); on a partitioned queue earliest, latest, time: (every partition) or a cursor p<k>:<cursor>,... (the partitions it names)",
    },
    ...targetArgs,
  },
  async run({ args }) {
    const to = parseTarget(args.to);
    const cursor = args.url
      ? (await apiClient(args.url, args.user).seek(args.queue, args.consumer, to)).cursor
      : await seekDirect(args, args.queue, args.consumer, to);
    log.success(`Consumer "${args.consumer}" of "${args.queue}" is now at ${cursor}.`);
  },
});

/** `earliest`, `latest`, a cursor, `<part>:<seq>`, or `time:<ISO date or ms>`. */
export function parseTarget(text: string): SeekRequest["to"] {
  if (text.startsWith("time:")) {
    const time = text.slice(5);
    if (/^\d{1,15}$/.test(time)) return { time: Number(time) };
    if (Number.isFinite(Date.parse(time))) return { time };
    throw new CliError(`Invalid time ${JSON.stringify(time)}: use an ISO 8601 date such as time:2026-12-03T10:00:00Z, or ms since the epoch.`);
  }
  // A composite cursor of a partitioned queue (p<k>:<cursor>,...): checked against the queue's partitions by the seek.
  if (text === "earliest" || text === "latest" || isCursor(text) || /^p\d{1,4}:/.test(text)) return text;
  const match = /^(\d{1,15}):(\d{1,10})$/.exec(text);
  if (match && Number(match[2]) >= 1) return { part: Number(match[1]), seq: Number(match[2]) };
  throw new CliError(
    `Invalid target ${JSON.stringify(text)}: use earliest, latest, a cursor <part>.<position>.<count> (p<k>:<cursor>,... on a partitioned queue), <part>:<seq> (seq from 1), or time:<ISO date or ms>.`,
  );
}

async function seekDirect(target: { dir?: string; storage?: string }, queue: string, name: string, to: SeekRequest["to"]): Promise<string> {
  const driver = await openStorage(target);
  try {
    // A partitioned queue: every partition is taken here (asked of a server that holds it), moved, and let go at close.
    const consumer = await openOrderedConsumer(queue, name, { driver, zstd: cliZstd }).catch((error: unknown) =>
      explain(error, `Cannot open consumer "${name}" of "${queue}" in ${storageLabel(target)}`),
    );
    try {
      return await consumer.seek(to);
    } finally {
      await consumer.close();
    }
  } finally {
    await driver.dispose?.();
  }
}
