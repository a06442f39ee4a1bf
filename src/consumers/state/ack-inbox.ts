import { crc32Ascii } from "../../format/crc32";
import type { DriverLock, QueueDriver } from "../../core/driver";
import type { ConsumerPosition } from "../../format/position";
import type { QueueProblem } from "../../core/errors";
import { sharedInboxDir } from "../../storage/paths";
import { line, messageKey, type MessageKey } from "./shared-state";
import { writeWhole } from "../../storage/write-whole";

/**
 * Acks, nacks and extends taken by an instance that does not hold the shared consumer they are
 * for, and commits of an ordered consumer's partition held elsewhere (consumers/ordered/partitioned.ts)
 * (docs/partitioned.md): its partition was handed over since the leases went out,
 * or the request reached another instance (Nitro's `node-cluster` hands each connection to any
 * worker). That instance writes them, durably, into the consumer's inbox, a directory of small
 * files (`Q_info_wanta_C/<instance>-<seq>`), each written whole once and never changed. The
 * holder reads the inbox when it opens, every `INBOX_CHECK_MS`, and before a lease that ran out
 * goes out again (an ack or extend posted in time counts), applies what it finds
 * (consumers/shared/consumer.ts), and removes a file once its acks are in its journal: a crash in between
 * applies them again, which changes nothing. Lines, each with the CRC-32 of what precedes it:
 * - `A;<part>;<offset>;<lease>;<crc>`: acknowledged;
 * - `N;<part>;<offset>;<lease>;<delayMs>;<r|d|->;<error, URI-encoded>;<crc>`: given back
 *   (`r` release, `d` dead-letter);
 * - `E;<part>;<offset>;<lease>;<until>;<crc>`: its lease runs until then (ms since the epoch);
 * - `C;<part>;<position>;<count>;<crc>`: an ordered consumer's commit up to that cursor.
 */

/** How often a holder looks into its inbox: an ack waits this long at most, a lease runs far longer. */
export const INBOX_CHECK_MS = 500;

/** One file of an inbox: an instance id, a dash, its sequence number (a temporary file of a write has another shape). */
const FILE_NAME = /^[0-9a-z]{1,64}-\d{1,15}$/;

/** The lease an inbox line is about. */
export interface InboxRef {
  key: MessageKey;
  part: number;
  offset: number;
  lease: number;
}

/** An ordered consumer's commit, taken elsewhere: up to `position`. */
export interface InboxCommit {
  kind: "commit";
  position: ConsumerPosition;
}

export type InboxItem =
  | { kind: "ack"; ref: InboxRef }
  | { kind: "nack"; ref: InboxRef; delayMs: number; release: boolean; deadLetter: boolean; error?: string }
  | { kind: "extend"; ref: InboxRef; until: number }
  | InboxCommit;

type RefOf = Omit<InboxRef, "key">;
/** What a poster is given: an item about a lease as poll returned it, or a commit. */
export type InboxPost =
  | { kind: "ack"; ref: RefOf }
  | { kind: "nack"; ref: RefOf; delayMs: number; release: boolean; deadLetter: boolean; error?: string }
  | { kind: "extend"; ref: RefOf; until: number }
  | InboxCommit;

function lineOf(item: InboxPost): string {
  if (item.kind === "commit") return line(`C;${item.position.part};${item.position.position};${item.position.count};`);
  const { part, offset, lease } = item.ref;
  const head = `${part};${offset};${lease};`;
  if (item.kind === "ack") return line(`A;${head}`);
  if (item.kind === "extend") return line(`E;${head}${item.until};`);
  const flag = item.release ? "r" : item.deadLetter ? "d" : "-";
  // A lone surrogate (a text cut in the middle of a pair) is no URI component: replaced.
  const error = (item.error ?? "").replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
  return line(`N;${head}${item.delayMs};${flag};${encodeURIComponent(error)};`);
}

function parseLine(fields: string): InboxItem | undefined {
  const [kind, ...rest] = fields.slice(0, -1).split(";");
  const [part, offset, lease, a] = rest.map(Number) as [number, number, number, number];
  if (![part, offset, lease].every((n) => Number.isSafeInteger(n) && n >= 0)) return undefined;
  if (kind === "C" && rest.length === 3) return { kind: "commit", position: { part, position: offset, count: lease } };
  const ref = { key: messageKey(part, offset), part, offset, lease };
  if (kind === "A" && rest.length === 3) return { kind: "ack", ref };
  if (kind === "E" && rest.length === 4 && Number.isSafeInteger(a)) return { kind: "extend", ref, until: a };
  if (kind === "N" && rest.length === 6 && Number.isSafeInteger(a) && a >= 0 && ["r", "d", "-"].includes(rest[4]!)) {
    let error: string | undefined;
    try {
      error = rest[5] ? decodeURIComponent(rest[5]) : undefined;
    } catch {
      return undefined;
    }
    return { kind: "nack", ref, delayMs: a, release: rest[4] === "r", deadLetter: rest[4] === "d", error };
  }
  return undefined;
}

/**
 * Writes items into inboxes for instance `from`: those posted in the same turn of the event loop
 * to one consumer go in one file (a batch of nacks, say, is one write).
 */
export class InboxPoster {
  readonly #pending = new Map<string, { lines: string[]; done: Promise<void> }>();
  #seq = 0;
  /** Inbox directories made (and synced into the base directory) by this poster. */
  readonly #made = new Set<string>();

  constructor(
    private readonly driver: QueueDriver,
    private readonly from: string,
    private readonly sync: boolean,
  ) {}

  /** Resolves once the items are stored (fsync'd with `sync`). */
  post(queue: string, consumer: string, items: readonly InboxPost[]): Promise<void> {
    const dir = sharedInboxDir(queue, consumer);
    const lines = items.map(lineOf);
    let batch = this.#pending.get(dir);
    if (!batch) {
      const batchLines: string[] = [];
      const done = new Promise<void>((resolve) => setTimeout(resolve, 0)).then(() => {
        this.#pending.delete(dir);
        return this.#write(dir, batchLines.join(""));
      });
      this.#pending.set(dir, (batch = { lines: batchLines, done }));
    }
    batch.lines.push(...lines);
    return batch.done;
  }

  async #write(dir: string, body: string): Promise<void> {
    await this.driver.mkdir(dir);
    // The directory's own entry, once: a crash must not take a stored ack with a new directory.
    if (this.sync && !this.#made.has(dir)) await this.driver.syncDir?.("");
    this.#made.add(dir);
    await writeWhole(this.driver, `${dir}/${this.from}-${++this.#seq}`, new TextEncoder().encode(body), this.sync);
    if (this.sync) await this.driver.syncDir?.(dir);
  }
}

/** The inbox's files and their items (a damaged line is skipped and told). */
export async function readInbox(
  driver: QueueDriver,
  queue: string,
  consumer: string,
  onProblem: (problem: QueueProblem) => void,
): Promise<{ files: string[]; items: InboxItem[] }> {
  const dir = sharedInboxDir(queue, consumer);
  const names = (await driver.list(dir)).filter((name) => FILE_NAME.test(name)).sort();
  const files: string[] = [];
  const items: InboxItem[] = [];
  let bad = 0;
  for (const name of names) {
    const path = `${dir}/${name}`;
    const bytes = await driver.readRecord(path);
    // Gone: applied and removed by a holder meanwhile. Empty: being written by a driver without
    // `writeAtomic` (made, then filled), left for the next round.
    if (bytes === undefined || bytes.length === 0) continue;
    files.push(path);
    for (const raw of new TextDecoder().decode(bytes).split("\n")) {
      if (raw === "") continue;
      const cut = raw.lastIndexOf(";") + 1;
      const fields = raw.slice(0, cut);
      const item = cut > 0 && String(crc32Ascii(fields)) === raw.slice(cut) ? parseLine(fields) : undefined;
      if (item) items.push(item);
      else bad++;
    }
  }
  if (bad > 0) onProblem({ code: "BAD_INFO", queue, message: `Consumer "${consumer}": skipped ${bad} damaged line(s) of its inbox (${dir}).` });
  return { files, items };
}

/**
 * Removes inbox files whose items are applied (each written once and never changed: nothing
 * newer is lost); `fence`, the holder's lock: a stale holder is refused (`E_FENCED`) before it
 * removes what its successor has not read.
 */
export async function clearInbox(driver: QueueDriver, files: readonly string[], fence?: DriverLock): Promise<void> {
  for (const path of files) await driver.remove(path, fence);
}
