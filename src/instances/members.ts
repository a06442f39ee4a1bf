/**
 * Who reads a consumer of a partitioned queue now, so that the instances share its partitions
 * evenly (partitions/fan.ts): one small record per consumer name (storage/paths.ts, `consumerMembersPath`),
 * a line per instance with the time it last polled. Each polling instance rewrites its own line
 * every `BEAT_MS` and drops the lines older than `MEMBER_FRESH_MS` (instances that stopped
 * polling, or died). Read-modify-write without a lock: two instances writing at once may drop
 * each other's line. So each instance also remembers whom it saw (and who asked it for a
 * partition) until that is `MEMBER_FRESH_MS` old, and writes them back with its own line; one
 * that finds its own line dropped writes it again at its next refresh. The
 * count only shapes how the partitions are shared, never what is read or acknowledged.
 */
import type { QueueDriver } from "../core/driver";
import { writeWhole } from "../storage/write-whole";

/** How often a polling instance rewrites its line. */
const BEAT_MS = 500;
/** A line older than this is of an instance that no longer polls (four beats missed). */
export const MEMBER_FRESH_MS = 2000;

const HEADER = "v-queue members\n";
const LINE = /^([A-Za-z0-9]{1,64}) (\d{1,16})$/;

/** The fair share of `partitions` among `members` instances: each holds at least `floor` and at most `ceil`. */
export interface Share {
  floor: number;
  ceil: number;
}

export class Members {
  readonly #driver: QueueDriver;
  readonly #path: string;
  readonly #self: string;
  /** The other instances seen lately, with when each last said it polls. */
  readonly #seen = new Map<string, number>();
  #beatAt = 0;
  #refreshedAt = 0;

  constructor(driver: QueueDriver, path: string, self: string) {
    this.#driver = driver;
    this.#path = path;
    this.#self = self;
  }

  /** Instances polling now, this one included (as of the last `refresh`). */
  get count(): number {
    return this.#seen.size + 1;
  }

  /** Whether this instance polled within `MEMBER_FRESH_MS`: others count it, and share with it. */
  get active(): boolean {
    return Date.now() - this.#refreshedAt < MEMBER_FRESH_MS;
  }

  /** The share of `partitions` among `members` instances (by default as many as this one counts). */
  share(partitions: number, members = this.count): Share {
    return { floor: Math.floor(partitions / members), ceil: Math.ceil(partitions / members) };
  }

  /**
   * Reads who polls (and, when `polls`, says that this instance does, every `BEAT_MS`); keeps the
   * last count when the storage fails.
   */
  async refresh(polls = true): Promise<number> {
    const now = Date.now();
    try {
      const lines = await this.#read();
      this.#merge(lines, now);
      if (!polls) return this.count;
      // A line dropped by another instance's write is written again at once, not a beat later:
      // meanwhile the others would count one instance fewer and take more than their share.
      const dropped = this.#beatAt > 0 && !lines.some(([id]) => id === this.#self);
      if (now - this.#beatAt >= BEAT_MS || dropped) {
        await this.#write([...this.#seen, [this.#self, now]]);
        this.#beatAt = now;
      }
      this.#refreshedAt = now;
    } catch {
      // A storage outage: the poll goes on with the last count; the next refresh tries again.
    }
    return this.count;
  }

  /** Instance `id` asked this one for a partition: it polls, whether or not its line was read yet. */
  saw(id: string): void {
    if (id === this.#self) return;
    this.#merge([[id, Date.now()]], Date.now());
  }

  /** Takes this instance's line out, so that the others grow their share sooner (best effort: else it ages out). */
  async leave(): Promise<void> {
    if (this.#beatAt === 0) return;
    this.#beatAt = 0;
    this.#refreshedAt = 0;
    const lines = await this.#read().catch(() => undefined);
    if (!lines) return;
    const others = lines.filter(([id, at]) => id !== this.#self && Date.now() - at < MEMBER_FRESH_MS);
    await (others.length > 0 ? this.#write(others) : this.#driver.remove(this.#path)).catch(() => {});
  }

  /** Adds `lines` to what was seen, and forgets what is no longer fresh. */
  #merge(lines: [string, number][], now: number): void {
    for (const [id, at] of lines) if (id !== this.#self && at > (this.#seen.get(id) ?? 0)) this.#seen.set(id, at);
    for (const [id, at] of this.#seen) if (now - at >= MEMBER_FRESH_MS) this.#seen.delete(id);
  }

  /** The record's lines. A missing or damaged record has none. */
  async #read(): Promise<[string, number][]> {
    const bytes = await this.#driver.readRecord(this.#path);
    const text = bytes ? new TextDecoder().decode(bytes) : "";
    if (!text.startsWith(HEADER)) return [];
    const out: [string, number][] = [];
    for (const line of text.slice(HEADER.length).split("\n")) {
      const match = LINE.exec(line);
      if (match) out.push([match[1]!, Number(match[2])]);
    }
    return out;
  }

  #write(lines: [string, number][]): Promise<void> {
    const text = HEADER + lines.map(([id, at]) => `${id} ${at}\n`).join("");
    return writeWhole(this.#driver, this.#path, new TextEncoder().encode(text), false);
  }
}
