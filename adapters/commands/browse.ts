/**
 * `browse`: a page of a queue's messages read without any consumer (nothing moves, nothing is
 * created), on the files or through a server. Each message is a header line, then its body:
 * text as text, JSON pretty-printed, bytes as hex. The next page's `--from` is said at the end.
 */
import { defineCommand } from "citty";
import type { BrowseResponse } from "../../protocol/api";
import { browseMessages, BROWSE_DEFAULTS, BROWSE_MAX_LIMIT } from "../../src/inspect/browse";
import { MAX_PARTITIONS } from "../../src/partitions/declaration";
import { parseCount } from "./_duration";
import type { Printable } from "./_print";
import { apiClient, cliZstd, log, plural, targetArgs, withStorage } from "./_shared";
import { parseTarget } from "./seek";

export const browse = defineCommand({
  meta: { name: "browse", description: "Print a page of a queue's messages without consuming them (text as text, JSON pretty-printed, bytes as hex)" },
  args: {
    queue: { type: "positional", required: true, description: "The queue (a dead-letter queue <queue>.dead too)" },
    from: {
      type: "string",
      description: "earliest, latest (the newest page), a cursor (the page after it), <part>:<seq>, or time:<ISO date or ms> [default: earliest]",
      valueHint: "where",
    },
    limit: { type: "string", description: `Most messages [default: ${BROWSE_DEFAULTS.limit}, at most ${BROWSE_MAX_LIMIT}]`, valueHint: "n" },
    partition: { type: "string", description: "A partitioned queue: this partition alone [default: every partition in turn]", valueHint: "k" },
    ...targetArgs,
  },
  async run({ args }) {
    const from = parseTarget(args.from ?? "earliest");
    const limit = args.limit === undefined ? BROWSE_DEFAULTS.limit : parseCount("--limit", args.limit, BROWSE_MAX_LIMIT);
    const partition = args.partition === undefined ? undefined : parseCount("--partition", args.partition, MAX_PARTITIONS - 1, 0);
    const only = partition === undefined ? {} : { partition };
    const page: { messages: Browsed[]; next: BrowseResponse["next"] } = args.url
      ? await apiClient(args.url, args.user).browse(args.queue, { from, limit, ...only })
      : await withStorage(args, `Cannot browse "${args.queue}"`, (driver) =>
          browseMessages(driver, args.queue, { from, limit, ...only, zstd: cliZstd, onProblem: (p) => log.warn(p.message) }),
        );
    process.stdout.write(page.messages.map(formatBrowsed).join(""));
    log.info(`${plural(page.messages.length, "message")} of "${args.queue}"${page.next ? `; next page: --from ${page.next}` : ", to the end"}.`);
  },
});

/** A message of a page: a partitioned queue's says its partition. */
type Browsed = Printable & { partition?: number };

/** A header line (`[p<k> ]<part>:<seq> offset <offset> <kind>`), then the body, then a blank line. */
export function formatBrowsed(m: Browsed): string {
  const where = `${m.partition === undefined ? "" : `p${m.partition} `}${m.part}:${m.seq} offset ${m.offset}`;
  if (typeof m.data !== "string") return `${where} bytes (${m.data.length})\n${hex(m.data)}\n\n`;
  const pretty = prettyJSON(m.data);
  return `${where} ${pretty === undefined ? "text" : "json"}\n${pretty ?? m.data}\n\n`;
}

/** Text that is a JSON object or array, indented; undefined for any other text. */
function prettyJSON(text: string): string | undefined {
  const start = text.trimStart()[0];
  if (start !== "{" && start !== "[") return undefined;
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return undefined;
  }
}

/** Bytes as rows of 16 hex pairs. */
function hex(bytes: Uint8Array): string {
  const rows: string[] = [];
  for (let at = 0; at < bytes.length; at += 16) rows.push(Array.from(bytes.subarray(at, at + 16), (b) => b.toString(16).padStart(2, "0")).join(" "));
  return rows.join("\n");
}
