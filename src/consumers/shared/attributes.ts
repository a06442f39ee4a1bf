/**
 * A shared consumer's view of its queue's message attributes (format/attributes.ts): the runs
 * of the parts from its read head on, read as they grow. Two uses: the attributes of the messages
 * the head reads (a record's run is written before it, so a read after the record's finds it),
 * and the messages of a priority above 0 that lie ahead of the head, so that they go out before
 * a backlog of lower ones is read (hand-out.ts).
 */
import type { LogFile, QueueDriver } from "../../core/driver";
import { PartAttributeRuns, type AttributeRun, type MessageAttributes } from "../../format/attributes";
import type { Message } from "../../format/message";
import type { ConsumerPosition } from "../../format/position";
import { forEachFrame } from "../../storage/side-log";
import { openSharedLog } from "../../storage/handles";
import { attributesPath, partPath } from "../../storage/paths";
import { peekQueueHub } from "../../storage/hub";

/** A file found missing is looked for again after this long, when no writer in this process says more (`QueueHub.stamp`). */
const MISSING_RECHECK_MS = 100;

/** When a file was found missing, and the in-process writer's stamp then (see `QueueHub.stamp`). */
interface Missing {
  at: number;
  stamp: string | undefined;
  /** The part's bytes known complete before the look: a record below this had its run written before it, so it has none. */
  covers?: number;
}

/** A part's file as read so far. */
interface PartView {
  log: LogFile | undefined;
  readAt: number;
  runs: PartAttributeRuns;
  /** The in-process writer's stamp before the last look at the file (see `QueueHub.stamp`): undefined with no writer here. */
  stamp?: string | undefined;
}

/** A message of a priority run ahead of the head, by position (its offset is known for a run's first only). */
export interface AheadRun {
  part: number;
  run: AttributeRun;
}

/** Parts after the head's that `ahead` looks at: the nearest first, the rest at a later take. */
const MAX_PARTS_AHEAD = 64;

export class AttributeIndex {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #parts = new Map<number, PartView>();
  /** Attribute files found missing, by part. */
  readonly #missing = new Map<number, Missing>();
  /** Part files found missing (after the head's part), by part. */
  readonly #missingParts = new Map<number, Missing>();
  /** What `ahead` found at its last look, and whether a run came since (then it looks again). */
  #ahead: { from: number; runs: AheadRun[] } | undefined;

  constructor(driver: QueueDriver, queue: string) {
    this.#driver = driver;
    this.#queue = queue;
  }

  /**
   * Each message's attributes (undefined for none); undefined when no message has any. `known`:
   * the reader's part and its bytes known complete when it read them (`PartReader.knownEnd`).
   */
  async lookup(messages: readonly Message[], known?: { part: number; bytes: number }): Promise<(MessageAttributes | undefined)[] | undefined> {
    let out: (MessageAttributes | undefined)[] | undefined;
    let part = -1;
    let runs: PartAttributeRuns | undefined;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]!;
      if (message.part !== part) {
        part = message.part;
        let last = i;
        while (last + 1 < messages.length && messages[last + 1]!.part === part) last++;
        // Exact: a record read has its run written before it, so a file missing at the last look may
        // be there now; unless that look came after this part's records up to the last of these.
        const missing = this.#missing.get(part);
        const view = this.#parts.get(part);
        const seen = view?.runs;
        // Runs are appended in record order: one read past the last of these names them all already,
        // unless a run was written since (the writer here says, by its stamp): runs read before
        // their records may be cut since (a rolled-back batch) and written again for new records.
        const stamp = view?.stamp;
        runs =
          (missing?.covers !== undefined && messages[last]!.offset < missing.covers) ||
          (seen !== undefined && seen.coveredTo >= messages[last]!.seq && stamp !== undefined && stamp === peekQueueHub(this.#driver, this.#queue)?.stamp)
            ? seen
            : await this.#refresh(part, true, known?.part === part ? known.bytes : undefined);
      }
      const run = runs?.find(message.seq);
      if (!run || (run.seq === message.seq && run.crc !== message.crc)) continue;
      out ??= new Array<MessageAttributes | undefined>(messages.length);
      out[i] = run.attributes;
    }
    return out;
  }

  /**
   * The runs of a priority above 0 of the head's part and the parts after it that exist,
   * highest priority first (then oldest); some may name messages behind the head already.
   */
  async ahead(head: ConsumerPosition): Promise<AheadRun[]> {
    for (const part of this.#parts.keys()) if (part < head.part) void this.#drop(part);
    for (const missing of [this.#missing, this.#missingParts]) for (const part of missing.keys()) if (part < head.part) missing.delete(part);
    let changed = this.#ahead?.from !== head.part;
    for (let part = head.part; part <= head.part + MAX_PARTS_AHEAD; part++) {
      const view = this.#parts.get(part);
      const before = view?.readAt ?? 0;
      const runs = await this.#refresh(part, false);
      if (!runs) {
        if (part === head.part || (await this.#partExists(part))) continue;
        break;
      }
      changed ||= (this.#parts.get(part)?.readAt ?? 0) !== before;
    }
    if (changed || !this.#ahead) {
      const found: AheadRun[] = [];
      for (const [at, view] of this.#parts) {
        if (at < head.part) continue;
        for (const run of view.runs.runs) if (run.attributes.priority) found.push({ part: at, run });
      }
      found.sort((a, b) => b.run.attributes.priority! - a.run.attributes.priority! || a.part - b.part || a.run.seq - b.run.seq);
      this.#ahead = { from: head.part, runs: found };
    }
    // The same list until a run comes or the head changes part: the caller passes over those it is done with.
    return this.#ahead.runs;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#parts.keys()].map((part) => this.#drop(part)));
  }

  async #partExists(part: number): Promise<boolean> {
    if (this.#knownMissing(this.#missingParts.get(part), false)) return false;
    const stamp = peekQueueHub(this.#driver, this.#queue)?.stamp;
    const log = await this.#driver.openLog(partPath(this.#queue, part), { create: false });
    await log?.close();
    if (!log) this.#missingParts.set(part, { at: Date.now(), stamp });
    else this.#missingParts.delete(part);
    return log !== undefined;
  }

  /**
   * Whether a file found `missing` is surely still missing: the writer in this process has not
   * changed nor written attributes since it was found missing. Not `exact`: also when it was
   * found missing a moment ago (a writer in another process).
   */
  #knownMissing(missing: Missing | undefined, exact: boolean): boolean {
    if (!missing) return false;
    const stamp = peekQueueHub(this.#driver, this.#queue)?.stamp;
    if (stamp !== undefined && missing.stamp !== undefined) return stamp === missing.stamp;
    return !exact && Date.now() - missing.at < MISSING_RECHECK_MS;
  }

  /** The part's runs with what was appended since the last look; undefined while it has no file (`exact`: see `#knownMissing`). */
  async #refresh(part: number, exact: boolean, covers?: number): Promise<PartAttributeRuns | undefined> {
    let view = this.#parts.get(part);
    if (!view?.log) {
      if (this.#knownMissing(this.#missing.get(part), exact)) return view?.runs;
      // Stamped before the look: a run written after it changes the stamp.
      const stamp = peekQueueHub(this.#driver, this.#queue)?.stamp;
      const log = await openSharedLog(this.#driver, attributesPath(this.#queue, part), { create: false });
      if (!log) {
        this.#missing.set(part, { at: Date.now(), stamp, covers });
        return view?.runs;
      }
      this.#missing.delete(part);
      view ??= { log, readAt: 0, runs: new PartAttributeRuns() };
      view.log = log;
      this.#parts.set(part, view);
    }
    // Stamped before the look: a run written after it changes the stamp.
    view.stamp = peekQueueHub(this.#driver, this.#queue)?.stamp;
    const size = await view.log!.size();
    if (size > view.readAt) {
      const bytes = await view.log!.read(view.readAt, size - view.readAt);
      const data = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const runs = view.runs;
      // The compaction's own marks (a 0 byte first) are no run.
      const end = forEachFrame(bytes, (start, stop) => {
        if (bytes[start] !== 0) runs.applyAt(bytes, data, start, stop);
      });
      view.readAt += end; // a frame being appended now is read whole at the next look
    }
    return view.runs;
  }

  async #drop(part: number): Promise<void> {
    const view = this.#parts.get(part);
    this.#parts.delete(part);
    this.#missing.delete(part);
    this.#missingParts.delete(part);
    await view?.log?.close();
  }
}
