import { crc32Ascii } from "../../format/crc32";
import { comparePositions, type ConsumerPosition } from "../../format/position";
import type { DriverLock, LogFile, QueueDriver } from "../../core/driver";
import type { QueueProblem } from "../../core/errors";
import { sharedJournalPath, sharedStatePath } from "../../storage/paths";
import { writeWhole } from "../../storage/write-whole";

/**
 * What a shared consumer keeps beside its `Q_info_pop_C` (the ack floor, crate format):
 * - `Q_info_shared_C`, the snapshot: written whole and atomically (`writeAtomic`); its first
 *   line marks the name as a shared consumer's.
 * - `Q_info_shlog_C`, the journal: lines appended since the snapshot.
 * Every line is `<fields>;<crc>\n`, the crc (zlib CRC-32, as the info lines) over the line up to
 * its last `;`:
 * - `H;v-queue-shared;1;` (header);
 * - `A;<part>;<offset>;`: the message at `offset` is acknowledged (above the floor);
 * - `R;<part>;<from>;<to>;<count>;`: every message of `part` whose offset lies in [from, to]
 *   is acknowledged (`count` of them, for inspection); written only for a run of messages that
 *   are all acknowledged, one line per run of a group commit instead of one per ack;
 * - `W;<part>;<position>;<count>;` (the high-water mark): every message before this position
 *   was handed out at least once, but those with a `D` line say their own count. New messages
 *   mostly go out in queue order, so one mark per group commit, written before the hand-out,
 *   counts the first deliveries: a message below the mark with no `D` line has been handed out once;
 * - `D;<part>;<offset>;<deliveries>;`: handed out that many times, not acknowledged (written
 *   for a second hand-out and later, for a first one the mark cannot count, and with 0, before
 *   the mark in the same write, for the few the mark passes that wait still: a group's next
 *   message; files of earlier versions have one for each hand-out);
 * - `L;<count>;`: messages moved to the dead-letter queue since the consumer was created;
 * - `B;<lease>;` (born): the lease ids of this consumer are above it (the clock when the name was
 *   created, in lease units): a token from a consumer of the same name deleted before (with its
 *   queue, or alone) is below and refused, not taken for a new message at its position. Files of
 *   earlier versions have none (0: every lease id is taken).
 * - `T;<at>;<count>;` (taken): `count` messages were handed out at `at` (ms since the epoch), for a
 *   consumer with a rate limit (consumers/shared/limiter.ts); a snapshot keeps those still in its window;
 * - `P;<until>;` (paused): nothing is handed out before `until` (a back-off; the latest counts);
 * - `G;<at>;<count>;<group>;` (group taken): `count` messages of `group` were handed out at `at`,
 *   for a consumer with a per-group rate limit (consumers/shared/group-limiter.ts); the group
 *   comes last, as all of the line up to its last `;` (a group may hold `;`); a snapshot keeps
 *   those still in their group's window.
 * All only grow in meaning (sets of acks, counts and a mark that only go up), so replaying the
 * journal over any snapshot, twice or in part, gives the same state: a crash between writing
 * the new snapshot and emptying the journal loses nothing. A line with a bad crc (a torn last
 * append) is skipped. Lines at or below the floor mean nothing and are dropped at the next snapshot.
 */

const HEADER = "H;v-queue-shared;1;";
const ascii = new TextEncoder();
const text = new TextDecoder();

/** `<part>.<offset>`: one message of the queue. */
export type MessageKey = string;
export const messageKey = (part: number, offset: number): MessageKey => `${part}.${offset}`;

/** Acks above the floor and delivery counts, as loaded. */
export interface SharedSnapshot {
  acked: Set<MessageKey>;
  /** `R` lines: runs of acknowledged messages. */
  ranges: AckRanges;
  /** Explicit counts (`D` lines); below `mark`, a message without one was handed out once. */
  deliveries: Map<MessageKey, number>;
  /** The high-water mark (`W`): every message before it was handed out at least once. */
  mark: ConsumerPosition | undefined;
  /** Messages dead-lettered since the consumer was created. */
  deadLettered: number;
  /** Lease ids at or below it are an earlier consumer's of this name (`B`); 0 when not known. */
  born: number;
  /** Hand-outs counted by a rate limit (`T`). */
  taken: TakenCount[];
  /** A back-off's end (`P`), ms since the epoch; 0 for none. */
  pausedUntil: number;
  /** Hand-outs counted by a per-group rate limit (`G`). */
  groupTaken: GroupTakenCount[];
}

/** `count` hand-outs of messages of `group` at `at` (ms since the epoch). */
export interface GroupTakenCount extends TakenCount {
  group: string;
}

/** `count` hand-outs at `at` (ms since the epoch). */
export interface TakenCount {
  at: number;
  count: number;
}

/** A run of acknowledged messages of one part: those whose offset lies in [from, to]. */
export interface AckRange {
  part: number;
  from: number;
  to: number;
  count: number;
}

/** The `R` lines loaded, in order: asked about messages in queue order (the read head's), each question O(1) amortised. */
export class AckRanges {
  #ranges: AckRange[] = [];
  #sorted = true;
  #next = 0;

  add(range: AckRange): void {
    const last = this.#ranges.at(-1);
    if (last && (last.part > range.part || (last.part === range.part && last.from > range.from))) this.#sorted = false;
    this.#ranges.push(range);
  }

  get all(): readonly AckRange[] {
    this.#sort();
    return this.#ranges;
  }

  /** Whether a range holds the message at `part`/`offset`; later questions must not be about earlier messages. */
  has(part: number, offset: number): boolean {
    this.#sort();
    const ranges = this.#ranges;
    while (this.#next < ranges.length && (ranges[this.#next]!.part < part || (ranges[this.#next]!.part === part && ranges[this.#next]!.to < offset)))
      this.#next++;
    // Ranges may overlap (a run written twice): any of those starting before the message may hold it.
    for (let i = this.#next; i < ranges.length && ranges[i]!.part === part && ranges[i]!.from <= offset; i++) if (ranges[i]!.to >= offset) return true;
    return false;
  }

  /** Whether a range the read head has not passed holds the message (any order; O(ranges)). */
  contains(part: number, offset: number): boolean {
    const ranges = this.all;
    for (let i = this.#next; i < ranges.length; i++) if (ranges[i]!.part === part && ranges[i]!.from <= offset && offset <= ranges[i]!.to) return true;
    return false;
  }

  /** The ranges the read head has not passed yet. */
  ahead(): AckRange[] {
    this.#sort();
    return this.#ranges.slice(this.#next);
  }

  #sort(): void {
    if (this.#sorted) return;
    this.#ranges.sort((a, b) => a.part - b.part || a.from - b.from);
    this.#sorted = true;
  }
}

/** A message as the ack lines need it: `seq` tells neighbours (seqs count up by one within a part). */
export interface AckedMessage {
  part: number;
  offset: number;
  seq: number;
}

/** Ack lines for `messages` (sorted in queue order): one `R` line per run of neighbours, an `A` line for one alone. */
export function ackLines(messages: readonly AckedMessage[]): string {
  let lines = "";
  for (let i = 0; i < messages.length;) {
    const first = messages[i]!;
    let j = i + 1;
    while (j < messages.length && messages[j]!.part === first.part && messages[j]!.seq === messages[j - 1]!.seq + 1) j++;
    lines +=
      j - i === 1 ? line(`A;${first.part};${first.offset};`) : rangeLine({ part: first.part, from: first.offset, to: messages[j - 1]!.offset, count: j - i });
    i = j;
  }
  return lines;
}

export const markLine = (mark: ConsumerPosition): string => line(`W;${mark.part};${mark.position};${mark.count};`);

export const line = (fields: string): string => `${fields}${crc32Ascii(fields)}\n`;
const fieldsOf = (key: MessageKey): string => key.replace(".", ";");
export const ackLine = (key: MessageKey): string => line(`A;${fieldsOf(key)};`);
export const rangeLine = (range: AckRange): string => line(`R;${range.part};${range.from};${range.to};${range.count};`);
export const deliveryLine = (key: MessageKey, deliveries: number): string => line(`D;${fieldsOf(key)};${deliveries};`);
export const deadLetteredLine = (count: number): string => line(`L;${count};`);
export const bornLine = (born: number): string => line(`B;${born};`);
export const takenLine = (at: number, count: number): string => line(`T;${at};${count};`);
export const backOffLine = (until: number): string => line(`P;${until};`);
export const groupTakenLine = (at: number, count: number, group: string): string => line(`G;${at};${count};${group};`);

/** The lease id of `at` (ms since the epoch): lease ids count from the clock in thousandths of a ms. */
export const leaseIdAt = (at: number): number => Math.floor(at) * 1000;

let lastLeaseId = 0;
/**
 * A new lease id, above `floor` and every id this process gave before (whichever consumer):
 * a consumer created after another of its name was deleted is born above all that one's leases.
 */
export function nextLeaseId(floor = 0): number {
  lastLeaseId = Math.max(lastLeaseId + 1, floor + 1, leaseIdAt(Date.now()));
  return lastLeaseId;
}

/** Whether the message at `key` lies before `floor` (acknowledged through the pop line). */
export function isBelow(key: MessageKey, floor: ConsumerPosition): boolean {
  const [part, offset] = key.split(".").map(Number) as [number, number];
  return startsBelow(part, offset, floor);
}

/** Whether the message starting at `part`/`offset` lies before `position`. */
export const startsBelow = (part: number, offset: number, position: ConsumerPosition | undefined): boolean =>
  position !== undefined && (part < position.part || (part === position.part && offset < position.position));

export class SharedState {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #consumer: string;
  readonly #sync: boolean;
  /** The consumer's lock: the fence of every write (core/driver.ts); none for a reader (inspect). */
  readonly #fence: DriverLock | undefined;
  #journal: LogFile | undefined;
  #size = 0;
  #snapshotBytes = 0;

  constructor(driver: QueueDriver, queue: string, consumer: string, sync: boolean, fence?: DriverLock) {
    this.#driver = driver;
    this.#queue = queue;
    this.#consumer = consumer;
    this.#sync = sync;
    this.#fence = fence;
  }

  /** Bytes in the journal since the last snapshot. */
  get journalBytes(): number {
    return this.#size;
  }

  /** Bytes of the last snapshot written. */
  get snapshotBytes(): number {
    return this.#snapshotBytes;
  }

  /** Whether the consumer name is a shared consumer's (its snapshot exists). */
  static async exists(driver: QueueDriver, queue: string, consumer: string): Promise<boolean> {
    return (await driver.readRecord(sharedStatePath(queue, consumer))) !== undefined;
  }

  /** Marks a new consumer name as shared: an empty snapshot (and no journal), before its pop line is written. */
  static async create(driver: QueueDriver, queue: string, consumer: string, sync: boolean, fence?: DriverLock): Promise<void> {
    await driver.remove(sharedJournalPath(queue, consumer), fence);
    await writeWhole(driver, sharedStatePath(queue, consumer), ascii.encode(line(HEADER) + bornLine(nextLeaseId())), sync, fence);
    if (sync) await driver.syncDir?.("");
  }

  /** Reads the snapshot and the journal; lines with a bad crc are reported and skipped. */
  async load(onProblem: (problem: QueueProblem) => void): Promise<SharedSnapshot> {
    const state: SharedSnapshot = {
      acked: new Set(),
      ranges: new AckRanges(),
      deliveries: new Map(),
      mark: undefined,
      deadLettered: 0,
      born: 0,
      taken: [],
      pausedUntil: 0,
      groupTaken: [],
    };
    const snapshot = await this.#driver.readRecord(sharedStatePath(this.#queue, this.#consumer));
    const journal = await this.#driver.openLog(sharedJournalPath(this.#queue, this.#consumer), { create: false });
    let journalText = "";
    if (journal) {
      try {
        const size = await journal.size();
        journalText = text.decode(await journal.read(0, size));
      } finally {
        await journal.close();
      }
    }
    let bad = 0;
    for (const raw of [text.decode(snapshot ?? new Uint8Array()), journalText].join("").split("\n")) {
      if (raw === "") continue;
      const cut = raw.lastIndexOf(";") + 1;
      const fields = raw.slice(0, cut);
      if (cut === 0 || String(crc32Ascii(fields)) !== raw.slice(cut)) {
        bad++;
        continue;
      }
      const [kind, a, b, c, d] = fields.split(";");
      if (kind === "A") state.acked.add(`${Number(a)}.${Number(b)}`);
      else if (kind === "R") state.ranges.add({ part: Number(a), from: Number(b), to: Number(c), count: Number(d) });
      else if (kind === "W") {
        const mark = { part: Number(a), position: Number(b), count: Number(c) };
        if (!state.mark || comparePositions(mark, state.mark) > 0) state.mark = mark;
      } else if (kind === "D") {
        const key = `${Number(a)}.${Number(b)}`;
        state.deliveries.set(key, Math.max(state.deliveries.get(key) ?? 0, Number(c)));
      } else if (kind === "L") state.deadLettered = Math.max(state.deadLettered, Number(a));
      else if (kind === "B") state.born = Math.max(state.born, Number(a) || 0);
      else if (kind === "T" && Number.isSafeInteger(Number(a)) && Number(b) > 0) state.taken.push({ at: Number(a), count: Number(b) });
      else if (kind === "P") state.pausedUntil = Math.max(state.pausedUntil, Number(a) || 0);
      else if (kind === "G") {
        // The group is the rest of the line: it may hold `;`.
        const group = fields.slice(`G;${a};${b};`.length, -1);
        if (Number.isSafeInteger(Number(a)) && Number(b) > 0 && group !== "") state.groupTaken.push({ at: Number(a), count: Number(b), group });
      }
    }
    if (bad > 0) {
      onProblem({
        code: "BAD_INFO",
        queue: this.#queue,
        message: `Shared consumer "${this.#consumer}": skipped ${bad} damaged line(s) of its state (a torn last write is normal after a crash).`,
      });
    }
    return state;
  }

  /** Appends lines to the journal; fsync'd when the consumer syncs its commits. */
  async append(lines: string): Promise<void> {
    const journal = (this.#journal ??= await this.#driver.openLog(sharedJournalPath(this.#queue, this.#consumer), { create: true }));
    const bytes = ascii.encode(lines);
    await journal!.append(this.#size, bytes, this.#fence);
    this.#size += bytes.length;
    if (this.#sync) await journal!.sync();
  }

  /**
   * Writes `lines` (the whole state above the floor) as the new snapshot, then starts an empty
   * journal. The floor must already be saved: a line dropped here is one the pop line covers.
   */
  async compact(lines: string): Promise<void> {
    // Fenced: a stale holder is refused here, before it removes the new holder's journal.
    const snapshot = ascii.encode(line(HEADER) + lines);
    await writeWhole(this.#driver, sharedStatePath(this.#queue, this.#consumer), snapshot, this.#sync, this.#fence);
    this.#snapshotBytes = snapshot.length;
    await this.#journal?.close();
    this.#journal = undefined;
    // Fenced too: a holder paused between these two steps must not remove its successor's journal.
    await this.#driver.remove(sharedJournalPath(this.#queue, this.#consumer), this.#fence);
    this.#size = 0;
  }

  async close(): Promise<void> {
    const journal = this.#journal;
    this.#journal = undefined;
    await journal?.close();
  }
}
