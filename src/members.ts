/**
 * Who reads a consumer of a partitioned queue now, so that the instances share its partitions
 * evenly (partition-fan.ts): one small record per consumer name (paths.ts, `consumerMembersPath`),
 * a line per instance with the time it last polled. Each polling instance rewrites its own line
 * every `BEAT_MS` and drops the lines older than `MEMBER_FRESH_MS` (instances that stopped
 * polling, or died). Read-modify-write without a lock: two instances writing at once may drop
 * each other's line, and the next beat puts it back. A count can so be off for a beat; it only
 * shapes how the partitions are shared, never what is read or acknowledged.
 */
import type { QueueDriver } from "./driver";
import { writeWhole } from "./write-whole";

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
  #count = 1;
  #beatAt = 0;
  #refreshedAt = 0;

  constructor(driver: QueueDriver, path: string, self: string) {
    this.#driver = driver;
    this.#path = path;
    this.#self = self;
  }

  /** Instances polling now, this one included (as of the last `refresh`). */
  get count(): number {
    return this.#count;
  }

  /** Whether this instance polled within `MEMBER_FRESH_MS`: others count it, and share with it. */
  get active(): boolean {
    return Date.now() - this.#refreshedAt < MEMBER_FRESH_MS;
  }

  /** This instance's share of `partitions`. */
  share(partitions: number): Share {
    return { floor: Math.floor(partitions / this.#count), ceil: Math.ceil(partitions / this.#count) };
  }

  /** Reads who polls (and says that this instance does, every `BEAT_MS`); keeps the last count when the storage fails. */
  async refresh(): Promise<number> {
    const now = Date.now();
    try {
      const others = await this.#others(now);
      if (now - this.#beatAt >= BEAT_MS) {
        await this.#write([...others, [this.#self, now]]);
        this.#beatAt = now;
      }
      this.#count = others.length + 1;
      this.#refreshedAt = now;
    } catch {
      // A storage outage: the poll goes on with the last count; the next refresh tries again.
    }
    return this.#count;
  }

  /** Takes this instance's line out, so that the others grow their share at once (best effort: else it ages out). */
  async leave(): Promise<void> {
    if (this.#beatAt === 0) return;
    this.#beatAt = 0;
    this.#refreshedAt = 0;
    const others = await this.#others(Date.now()).catch(() => undefined);
    if (!others) return;
    await (others.length > 0 ? this.#write(others) : this.#driver.remove(this.#path)).catch(() => {});
  }

  /** The fresh lines of the other instances. A missing or damaged record has none. */
  async #others(now: number): Promise<[string, number][]> {
    const bytes = await this.#driver.readRecord(this.#path);
    const text = bytes ? new TextDecoder().decode(bytes) : "";
    if (!text.startsWith(HEADER)) return [];
    const out: [string, number][] = [];
    for (const line of text.slice(HEADER.length).split("\n")) {
      const match = LINE.exec(line);
      if (!match || match[1] === this.#self) continue;
      const at = Number(match[2]);
      if (now - at < MEMBER_FRESH_MS) out.push([match[1]!, at]);
    }
    return out;
  }

  #write(lines: [string, number][]): Promise<void> {
    const text = HEADER + lines.map(([id, at]) => `${id} ${at}\n`).join("");
    return writeWhole(this.#driver, this.#path, new TextEncoder().encode(text), false);
  }
}
