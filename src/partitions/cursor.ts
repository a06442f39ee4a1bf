/**
 * The cursor of a partitioned ordered consumer: one ordinary cursor (format/position.ts) per partition
 * this instance served, `p0:<part>.<position>.<count>,p3:...`, in partition order. It commits
 * everything it names and nothing of the other partitions.
 */
import { CURSOR_RE } from "../format/position";
import { VQueueError } from "../core/errors";

const ENTRY_RE = /^p(0|[1-9]\d{0,3}):(.+)$/;

/** `p<k>:<cursor>` for each entry, in partition order. */
export function formatPartitionedCursor(entries: Iterable<[partition: number, cursor: string]>): string {
  return [...entries]
    .sort((a, b) => a[0] - b[0])
    .map(([partition, cursor]) => `p${partition}:${cursor}`)
    .join(",");
}

/** Each partition's cursor of a composite cursor of a queue with `partitions` partitions; `E_CURSOR` saying what is wrong. */
export function parsePartitionedCursor(text: unknown, partitions: number): Map<number, string> {
  const fail = (why: string) =>
    new VQueueError(
      "E_CURSOR",
      `Invalid cursor ${JSON.stringify(typeof text === "string" ? text.slice(0, 200) : text)}: ${why}; expected "p<partition>:<part>.<position>.<count>" per partition, comma-separated, as a partitioned consumer gives.`,
    );
  if (typeof text !== "string" || text.length === 0) throw fail("empty or not a string");
  const out = new Map<number, string>();
  for (const entry of text.split(",")) {
    const match = ENTRY_RE.exec(entry);
    if (!match) throw fail(`"${entry.slice(0, 60)}" is no "p<partition>:<cursor>"`);
    const partition = Number(match[1]);
    if (partition >= partitions) throw fail(`partition ${partition} does not exist (the queue has ${partitions})`);
    if (out.has(partition)) throw fail(`partition ${partition} is named twice`);
    if (!CURSOR_RE.test(match[2]!)) throw fail(`the cursor of partition ${partition} is malformed`);
    out.set(partition, match[2]!);
  }
  return out;
}
