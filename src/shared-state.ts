import { crc32Ascii } from "./crc32";
import type { ConsumerPosition } from "./cursor";
import type { LogFile, QueueDriver } from "./driver";
import type { QueueProblem } from "./errors";
import { sharedJournalPath, sharedStatePath } from "./paths";
import { writeWhole } from "./write-whole";

/**
 * What a shared consumer keeps beside its `Q_info_pop_C` (the ack floor, crate format):
 * - `Q_info_shared_C`, the snapshot: written whole and atomically (`writeAtomic`); its first
 *   line marks the name as a shared consumer's.
 * - `Q_info_shlog_C`, the journal: lines appended since the snapshot.
 * Every line is `<fields>;<crc>\n`, the crc (zlib CRC-32, as the info lines) over the line up to
 * its last `;`: `H;v-queue-shared;1;` (header), `A;<part>;<offset>;` (acknowledged above the
 * floor), `D;<part>;<offset>;<deliveries>;` (delivered that many times, not acknowledged),
 * `L;<count>;` (messages moved to the dead-letter queue since the consumer was created).
 * Both only grow in meaning (a set of acks, counts that only go up), so replaying the journal
 * over any snapshot, twice or in part, gives the same state: a crash between writing the new
 * snapshot and emptying the journal loses nothing. A line with a bad crc (a torn last append)
 * is skipped. Lines at or below the floor mean nothing and are dropped at the next snapshot.
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
  deliveries: Map<MessageKey, number>;
  /** Messages dead-lettered since the consumer was created. */
  deadLettered: number;
}

export const line = (fields: string): string => `${fields}${crc32Ascii(fields)}\n`;
const fieldsOf = (key: MessageKey): string => key.replace(".", ";");
export const ackLine = (key: MessageKey): string => line(`A;${fieldsOf(key)};`);
export const deliveryLine = (key: MessageKey, deliveries: number): string => line(`D;${fieldsOf(key)};${deliveries};`);
export const deadLetteredLine = (count: number): string => line(`L;${count};`);

/** Whether the message at `key` lies before `floor` (acknowledged through the pop line). */
export function isBelow(key: MessageKey, floor: ConsumerPosition): boolean {
  const [part, offset] = key.split(".").map(Number) as [number, number];
  return part < floor.part || (part === floor.part && offset < floor.position);
}

export class SharedState {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #consumer: string;
  readonly #sync: boolean;
  #journal: LogFile | undefined;
  #size = 0;

  constructor(driver: QueueDriver, queue: string, consumer: string, sync: boolean) {
    this.#driver = driver;
    this.#queue = queue;
    this.#consumer = consumer;
    this.#sync = sync;
  }

  /** Bytes in the journal since the last snapshot. */
  get journalBytes(): number {
    return this.#size;
  }

  /** Whether the consumer name is a shared consumer's (its snapshot exists). */
  static async exists(driver: QueueDriver, queue: string, consumer: string): Promise<boolean> {
    return (await driver.readRecord(sharedStatePath(queue, consumer))) !== undefined;
  }

  /** Marks a new consumer name as shared: an empty snapshot, before its pop line is written. */
  static async create(driver: QueueDriver, queue: string, consumer: string, sync: boolean): Promise<void> {
    await writeWhole(driver, sharedStatePath(queue, consumer), ascii.encode(line(HEADER)), sync);
    if (sync) await driver.syncDir?.("");
  }

  /** Reads the snapshot and the journal; lines with a bad crc are reported and skipped. */
  async load(onProblem: (problem: QueueProblem) => void): Promise<SharedSnapshot> {
    const state: SharedSnapshot = { acked: new Set(), deliveries: new Map(), deadLettered: 0 };
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
      const [kind, a, b, c] = fields.split(";");
      if (kind === "A") state.acked.add(`${Number(a)}.${Number(b)}`);
      else if (kind === "D") {
        const key = `${Number(a)}.${Number(b)}`;
        state.deliveries.set(key, Math.max(state.deliveries.get(key) ?? 0, Number(c)));
      } else if (kind === "L") state.deadLettered = Math.max(state.deadLettered, Number(a));
    }
    if (bad > 0) {
      onProblem({ code: "BAD_INFO", queue: this.#queue, message: `Shared consumer "${this.#consumer}": skipped ${bad} damaged line(s) of its state (a torn last write is normal after a crash).` });
    }
    return state;
  }

  /** Appends lines to the journal; fsync'd when the consumer syncs its commits. */
  async append(lines: string): Promise<void> {
    const journal = (this.#journal ??= await this.#driver.openLog(sharedJournalPath(this.#queue, this.#consumer), { create: true }));
    const bytes = ascii.encode(lines);
    await journal!.append(this.#size, bytes);
    this.#size += bytes.length;
    if (this.#sync) await journal!.sync();
  }

  /**
   * Writes `lines` (the whole state above the floor) as the new snapshot, then starts an empty
   * journal. The floor must already be saved: a line dropped here is one the pop line covers.
   */
  async compact(lines: string): Promise<void> {
    await writeWhole(this.#driver, sharedStatePath(this.#queue, this.#consumer), ascii.encode(line(HEADER) + lines), this.#sync);
    await this.#journal?.close();
    this.#journal = undefined;
    await this.#driver.remove(sharedJournalPath(this.#queue, this.#consumer));
    this.#size = 0;
  }

  async close(): Promise<void> {
    const journal = this.#journal;
    this.#journal = undefined;
    await journal?.close();
  }
}

