// Over 300 lines: the inbox's two kinds of file (items, verdicts) and both of its sides (the poster, the
// holder's read and answer) share one line codec and one naming; split, each half would need the other's.
import { crc32Ascii } from "../../format/crc32";
import type { DriverLock, QueueDriver } from "../../core/driver";
import type { ConsumerPosition } from "../../format/position";
import { VQueueError, type QueueProblem, type VQueueErrorCode } from "../../core/errors";
import { sleep } from "../../core/sleep";
import { sharedInboxDir } from "../../storage/paths";
import { line, messageKey, type MessageKey } from "./shared-state";
import { writeWhole } from "../../storage/write-whole";

/**
 * Acks, nacks and extends taken by an instance that does not hold the shared consumer they are
 * for, and commits of an ordered consumer held elsewhere (a partition's, consumers/ordered/partitioned.ts,
 * or an ordinary queue's, the server's runtime/registry.ts and runtime/elsewhere-slot.ts)
 * (docs/partitioned.md): its partition was handed over since the leases went out,
 * or the request reached another instance (Nitro's `node-cluster` hands each connection to any
 * worker). That instance writes them, durably, into the consumer's inbox, a directory of small
 * files (`Q_info_wanta_C/<instance>-<seq>`), each written whole once and never changed. The
 * holder reads the inbox when it opens, at the inbox pace (inbox-pace.ts), and before a lease that ran out
 * goes out again (an ack or extend posted in time counts), applies what it finds
 * (consumers/shared/inbox.ts, consumers/ordered/commit-inbox.ts), writes its verdict on each line
 * into `<instance>-<seq>.v` beside the file (written whole, fenced by its lock), and removes
 * the file once its acks are in its journal: a crash in between applies them again, which
 * changes nothing. The poster answers only with the verdict (it reads the verdict file every
 * `VERDICT_POLL_MS` at most, then removes it): an ack is never answered done before the holder decided,
 * so a message handed out again meanwhile gets the refusal a direct ack gets. No verdict within
 * `VERDICT_WAIT_MS` (the holder is paused, or gone and nobody opened the consumer since):
 * `E_PENDING`, the file stays and its next holder applies it. A verdict nobody took (its poster
 * gave up or died) is removed by the holder `VERDICT_KEEP_MS` after it first saw it.
 * Lines of an inbox file, each with the CRC-32 of what precedes it:
 * - `A;<part>;<offset>;<lease>;<crc>`: acknowledged; `A;<part>;<offset>;<lease>;<result>;<crc>`: with
 *   its handler's result (JSON, URI-encoded: format/outcome.ts);
 * - `G;<part>;<offset>;<lease>;<progress>;<crc>`: its handler's progress (JSON, URI-encoded);
 * - `N;<part>;<offset>;<lease>;<delayMs>;<r|d|->;<error, URI-encoded>;<crc>`: given back (`delayMs` empty:
 *   the message's backoff, format/attributes.ts; `~<ms>`: that backoff, else `<ms>`)
 *   (`r` release, `d` dead-letter);
 * - `E;<part>;<offset>;<lease>;<until>;<crc>`: its lease runs until then (ms since the epoch);
 * - `C;<part>;<position>;<count>;<crc>`: an ordered consumer's commit up to that cursor;
 * - `P;<until>;<crc>`: the shared consumer backs off until then (ms since the epoch), a worker's `rateLimit`.
 * Lines of a verdict file, one per line of its inbox file, in order:
 * - `D;<crc>`: done (acknowledged, given back, committed);
 * - `U;<until>;<crc>`: extended, the lease runs until then;
 * - `R;<code>;<message, URI-encoded>;<crc>`: refused, as the holder refuses that call (`E_LEASE`, `E_CURSOR`, ...).
 */

/** How often a poster looks for its verdict at most: first after `VERDICT_FIRST_POLL_MS`, then twice as long each time up to this. */
export const VERDICT_POLL_MS = 50;
const VERDICT_FIRST_POLL_MS = 5;
/** How long a poster waits for its verdict: an idle holder looks every INBOX_CHECK_MS, a loaded one later. */
export const VERDICT_WAIT_MS = 10_000;
/** A verdict still there this long after its holder first saw it has no poster waiting for it. */
export const VERDICT_KEEP_MS = 6 * VERDICT_WAIT_MS;

/** One file of an inbox: an instance id, a dash, its sequence number (a temporary file of a write has another shape). */
const FILE_NAME = /^[0-9a-z]{1,64}-\d{1,15}$/;
/** The verdict on one: its name and `.v`. */
const VERDICT_NAME = /^[0-9a-z]{1,64}-\d{1,15}\.v$/;
const verdictPath = (file: string): string => `${file}.v`;

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

/** A shared consumer's back-off, taken elsewhere: nothing is handed out before `until`. */
export interface InboxBackOff {
  kind: "backOff";
  until: number;
}

export type InboxItem =
  | InboxBackOff
  | { kind: "ack"; ref: InboxRef; result?: string }
  | { kind: "progress"; ref: InboxRef; progress: string }
  | { kind: "nack"; ref: InboxRef; delayMs?: number; defaultDelayMs?: number; release: boolean; deadLetter: boolean; error?: string }
  | { kind: "extend"; ref: InboxRef; until: number }
  | InboxCommit;

type RefOf = Omit<InboxRef, "key">;
/** What a poster is given: an item about a lease as poll returned it, or a commit. */
export type InboxPost =
  | InboxBackOff
  /** `result`, `progress`: JSON, as `outcomeValueJson` (format/outcome.ts) checked it. */
  | { kind: "ack"; ref: RefOf; result?: string }
  | { kind: "progress"; ref: RefOf; progress: string }
  | { kind: "nack"; ref: RefOf; delayMs?: number; defaultDelayMs?: number; release: boolean; deadLetter: boolean; error?: string }
  | { kind: "extend"; ref: RefOf; until: number }
  | InboxCommit;

/** The holder's decision on one item: done (an extend with its lease's new end), or refused with the error a direct call gets. */
export type Verdict = { done: true; until?: number } | { done: false; code: VQueueErrorCode; message: string };

export const DONE: Verdict = { done: true };

export function refusal(error: unknown): Verdict {
  if (VQueueError.isError(error)) return { done: false, code: error.code, message: error.message };
  return { done: false, code: "E_IO", message: error instanceof Error ? error.message : String(error) };
}

/** The error of a refused verdict (undefined when done). */
export function verdictError(verdict: Verdict): VQueueError | undefined {
  return verdict.done ? undefined : new VQueueError(verdict.code, verdict.message);
}

/** What a verdict gives the caller: an extend's new end (undefined for the others); a refusal is thrown. */
export function outcome(verdict: Verdict): number | undefined {
  if (!verdict.done) throw new VQueueError(verdict.code, verdict.message);
  return verdict.until;
}

function verdictLine(verdict: Verdict): string {
  if (verdict.done) return line(verdict.until === undefined ? "D;" : `U;${verdict.until};`);
  return line(`R;${verdict.code};${encodeURIComponent(wellFormed(verdict.message))};`);
}

function parseVerdict(fields: string): Verdict | undefined {
  const [kind, ...rest] = fields.slice(0, -1).split(";");
  if (kind === "D" && rest.length === 0) return DONE;
  const until = Number(rest[0]);
  if (kind === "U" && rest.length === 1 && Number.isSafeInteger(until)) return { done: true, until };
  if (kind === "R" && rest.length === 2 && /^E_[A-Z_]{1,30}$/.test(rest[0]!)) {
    try {
      return { done: false, code: rest[0] as VQueueErrorCode, message: decodeURIComponent(rest[1]!) };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** A lone surrogate (a text cut in the middle of a pair) is no URI component: replaced. */
function wellFormed(text: string): string {
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

/** The fields of each line whose CRC-32 holds, undefined for a damaged one. */
function checkedLines(bytes: Uint8Array): (string | undefined)[] {
  return new TextDecoder()
    .decode(bytes)
    .split("\n")
    .filter((raw) => raw !== "")
    .map((raw) => {
      const cut = raw.lastIndexOf(";") + 1;
      const fields = raw.slice(0, cut);
      return cut > 0 && String(crc32Ascii(fields)) === raw.slice(cut) ? fields : undefined;
    });
}

function lineOf(item: InboxPost): string {
  if (item.kind === "commit") return line(`C;${item.position.part};${item.position.position};${item.position.count};`);
  if (item.kind === "backOff") return line(`P;${item.until};`);
  const { part, offset, lease } = item.ref;
  const head = `${part};${offset};${lease};`;
  if (item.kind === "ack") return line(item.result === undefined ? `A;${head}` : `A;${head}${encodeURIComponent(item.result)};`);
  if (item.kind === "progress") return line(`G;${head}${encodeURIComponent(item.progress)};`);
  if (item.kind === "extend") return line(`E;${head}${item.until};`);
  const flag = item.release ? "r" : item.deadLetter ? "d" : "-";
  const delay = item.delayMs ?? (item.defaultDelayMs === undefined ? "" : `~${item.defaultDelayMs}`);
  return line(`N;${head}${delay};${flag};${encodeURIComponent(wellFormed(item.error ?? ""))};`);
}

function parseLine(fields: string): InboxItem | undefined {
  const [kind, ...rest] = fields.slice(0, -1).split(";");
  const [part, offset, lease, a] = rest.map(Number) as [number, number, number, number];
  if (kind === "P" && rest.length === 1 && Number.isSafeInteger(part)) return { kind: "backOff", until: part };
  if (![part, offset, lease].every((n) => Number.isSafeInteger(n) && n >= 0)) return undefined;
  if (kind === "C" && rest.length === 3) return { kind: "commit", position: { part, position: offset, count: lease } };
  const ref = { key: messageKey(part, offset), part, offset, lease };
  if (kind === "A" && rest.length === 3) return { kind: "ack", ref };
  if ((kind === "A" || kind === "G") && rest.length === 4) {
    let json: string;
    try {
      json = decodeURIComponent(rest[3]!);
    } catch {
      return undefined;
    }
    return kind === "A" ? { kind: "ack", ref, result: json } : { kind: "progress", ref, progress: json };
  }
  if (kind === "E" && rest.length === 4 && Number.isSafeInteger(a)) return { kind: "extend", ref, until: a };
  const delay = rest[3] ?? "";
  const fallback = delay.startsWith("~") ? Number(delay.slice(1)) : undefined;
  const delayMs = delay === "" || fallback !== undefined ? undefined : a;
  const wait = fallback ?? delayMs;
  if (kind === "N" && rest.length === 6 && (wait === undefined || (Number.isSafeInteger(wait) && wait >= 0)) && ["r", "d", "-"].includes(rest[4]!)) {
    let error: string | undefined;
    try {
      error = rest[5] ? decodeURIComponent(rest[5]) : undefined;
    } catch {
      return undefined;
    }
    return { kind: "nack", ref, delayMs, defaultDelayMs: fallback, release: rest[4] === "r", deadLetter: rest[4] === "d", error };
  }
  return undefined;
}

/**
 * Writes items into inboxes for instance `from`, and waits for their holders' verdicts: those
 * posted in the same turn of the event loop to one consumer go in one file (a batch of nacks,
 * say, is one write, and one verdict file).
 */
export class InboxPoster {
  readonly #pending = new Map<string, { lines: string[]; done: Promise<Verdict[]> }>();
  #seq = 0;
  /** Inbox directories made (and synced into the base directory) by this poster. */
  readonly #made = new Set<string>();

  constructor(
    private readonly driver: QueueDriver,
    private readonly from: string,
    private readonly sync: boolean,
  ) {}

  /**
   * Resolves with the holder's verdict on each item once it applied them; `E_PENDING` when no
   * holder decided within `VERDICT_WAIT_MS` (they stay stored: its next holder applies them).
   */
  async post(queue: string, consumer: string, items: readonly InboxPost[]): Promise<Verdict[]> {
    const dir = sharedInboxDir(queue, consumer);
    let batch = this.#pending.get(dir);
    if (!batch) {
      const batchLines: string[] = [];
      const done = new Promise<void>((resolve) => setTimeout(resolve, 0)).then(async () => {
        this.#pending.delete(dir);
        const path = await this.#write(dir, batchLines.join(""));
        return this.#verdicts(path, batchLines.length, queue, consumer);
      });
      this.#pending.set(dir, (batch = { lines: batchLines, done }));
    }
    const first = batch.lines.length;
    batch.lines.push(...items.map(lineOf));
    return (await batch.done).slice(first, first + items.length);
  }

  async #write(dir: string, body: string): Promise<string> {
    await this.driver.mkdir(dir);
    // The directory's own entry, once: a crash must not take a stored ack with a new directory.
    if (this.sync && !this.#made.has(dir)) await this.driver.syncDir?.("");
    this.#made.add(dir);
    const path = `${dir}/${this.from}-${++this.#seq}`;
    await writeWhole(this.driver, path, new TextEncoder().encode(body), this.sync);
    if (this.sync) await this.driver.syncDir?.(dir);
    return path;
  }

  /** The verdict on each of the `count` lines of inbox file `path`, once its holder wrote it; then it goes. */
  async #verdicts(path: string, count: number, queue: string, consumer: string): Promise<Verdict[]> {
    const deadline = Date.now() + VERDICT_WAIT_MS;
    for (let waitMs = VERDICT_FIRST_POLL_MS; ; waitMs = Math.min(2 * waitMs, VERDICT_POLL_MS)) {
      const bytes = await this.driver.readRecord(verdictPath(path));
      // Empty or short: being written by a driver without `writeAtomic`, read again.
      const verdicts = bytes && checkedLines(bytes).map((fields) => (fields === undefined ? undefined : parseVerdict(fields)));
      if (verdicts?.length === count && verdicts.every((v) => v !== undefined)) {
        await this.driver.remove(verdictPath(path)).catch(() => {}); // left: its holder removes it later
        return verdicts as Verdict[];
      }
      if (Date.now() >= deadline) {
        throw new VQueueError(
          "E_PENDING",
          `Consumer "${consumer}" of queue "${queue}" is held by another instance that has not applied this yet (it is paused or busy, or gone and nobody opened the consumer since): it is stored and applied by the consumer's holder; retry to learn the outcome (an ack taken twice changes nothing).`,
        );
      }
      await sleep(waitMs);
    }
  }
}

/** One file of an inbox and its items in order (undefined: a damaged line). */
export interface InboxFile {
  path: string;
  items: (InboxItem | undefined)[];
}

/** What a holder read of its inbox: its files, and the verdict files there (see `answerInbox`). */
export interface InboxRead {
  files: InboxFile[];
  verdicts: string[];
}

/** The items of an inbox read, every file's, in order. */
export function inboxItems(read: InboxRead): InboxItem[] {
  return read.files.flatMap((file) => file.items.filter((item) => item !== undefined));
}

/** The inbox's files and their items (a damaged line is told, and refused). */
export async function readInbox(driver: QueueDriver, queue: string, consumer: string, onProblem: (problem: QueueProblem) => void): Promise<InboxRead> {
  const dir = sharedInboxDir(queue, consumer);
  const listed = await driver.list(dir);
  const names = listed.filter((name) => FILE_NAME.test(name)).sort();
  const files: InboxFile[] = [];
  let bad = 0;
  for (const name of names) {
    const path = `${dir}/${name}`;
    const bytes = await driver.readRecord(path);
    // Gone: applied and removed by a holder meanwhile. Empty: being written by a driver without
    // `writeAtomic` (made, then filled), left for the next round.
    if (bytes === undefined || bytes.length === 0) continue;
    const items = checkedLines(bytes).map((fields) => (fields === undefined ? undefined : parseLine(fields)));
    bad += items.filter((item) => item === undefined).length;
    files.push({ path, items });
  }
  if (bad > 0) onProblem({ code: "BAD_INFO", queue, message: `Consumer "${consumer}": skipped ${bad} damaged line(s) of its inbox (${dir}).` });
  return { files, verdicts: listed.filter((name) => VERDICT_NAME.test(name)).map((name) => `${dir}/${name}`) };
}

const DAMAGED: Verdict = { done: false, code: "E_CORRUPT", message: "The line was damaged in storage; send it again." };
/** An ack for an ordered consumer, a commit for a shared one: a consumer of that name of the other kind took it. */
const NOT_HERE: Verdict = { done: false, code: "E_KIND", message: "The consumer is of the other kind (ordered or shared) than this call is for." };

/** When each holder (by its lock) first saw each verdict file still there. */
const verdictsSeen = new WeakMap<DriverLock, Map<string, number>>();

/**
 * Ends a holder's round: writes its verdict on each item of each file read (`decided`; a damaged
 * line is refused), then removes the file (its items are applied), and removes the verdicts
 * nobody took for `VERDICT_KEEP_MS`. Every write is fenced by `fence`, the holder's lock: a
 * stale holder is refused (`E_FENCED`) before it answers or removes what its successor has not
 * read. Verdicts are not synced: one lost in a crash leaves its poster with `E_PENDING`, and
 * its retry with the verdict of a second application, which changes nothing.
 */
export async function answerInbox(driver: QueueDriver, read: InboxRead, decided: ReadonlyMap<InboxItem, Verdict>, fence: DriverLock): Promise<void> {
  for (const { path, items } of read.files) {
    const lines = items.map((item) => verdictLine(item === undefined ? DAMAGED : (decided.get(item) ?? NOT_HERE)));
    await writeWhole(driver, verdictPath(path), new TextEncoder().encode(lines.join("")), false, fence);
    await driver.remove(path, fence);
  }
  const seen = verdictsSeen.get(fence) ?? new Map<string, number>();
  verdictsSeen.set(fence, seen);
  const now = Date.now();
  const answered = new Set(read.files.map((file) => verdictPath(file.path)));
  const listed = new Set(read.verdicts);
  for (const path of [...seen.keys()]) if (!listed.has(path)) seen.delete(path);
  for (const path of read.verdicts) {
    if (answered.has(path)) continue;
    const first = seen.get(path) ?? now;
    seen.set(path, first);
    if (now - first >= VERDICT_KEEP_MS) await driver.remove(path, fence);
  }
}
