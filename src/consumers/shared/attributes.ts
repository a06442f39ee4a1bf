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
import { readFrames } from "../../storage/side-log";
import { openSharedLog } from "../../storage/handles";
import { attributesPath, partPath } from "../../storage/paths";

/** A part's file as read so far. */
interface PartView {
  log: LogFile | undefined;
  readAt: number;
  runs: PartAttributeRuns;
}

/** A message of a priority run ahead of the head, by position (its offset is known for a run's first only). */
export interface AheadRun {
  part: number;
  run: AttributeRun;
}

export class AttributeIndex {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  readonly #parts = new Map<number, PartView>();

  constructor(driver: QueueDriver, queue: string) {
    this.#driver = driver;
    this.#queue = queue;
  }

  /** Each message's attributes (undefined for none); undefined when no message has any. */
  async lookup(messages: readonly Message[]): Promise<(MessageAttributes | undefined)[] | undefined> {
    let out: (MessageAttributes | undefined)[] | undefined;
    let part = -1;
    let runs: PartAttributeRuns | undefined;
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i]!;
      if (message.part !== part) {
        part = message.part;
        runs = await this.#refresh(part);
      }
      const run = runs?.find(message.seq);
      if (!run || (run.seq === message.seq && run.crc !== message.crc)) continue;
      out ??= new Array<MessageAttributes | undefined>(messages.length);
      out[i] = run.attributes;
    }
    return out;
  }

  /**
   * The runs of a priority above 0 that name messages at or after `head`, highest priority
   * first (then oldest), from the head's part and the parts after it that exist.
   */
  async ahead(head: ConsumerPosition): Promise<AheadRun[]> {
    for (const part of this.#parts.keys()) if (part < head.part) void this.#drop(part);
    const out: AheadRun[] = [];
    for (let part = head.part; ; part++) {
      const runs = await this.#refresh(part);
      if (!runs) {
        if (part === head.part || (await this.#partExists(part))) continue;
        break;
      }
      for (const run of runs.runs) {
        if (!run.attributes.priority || (part === head.part && run.seq + run.count - 1 <= head.count)) continue;
        out.push({ part, run });
      }
      if (part > head.part + 64) break; // a backlog of parts: the nearest first, the rest at a later take
    }
    return out.sort((a, b) => b.run.attributes.priority! - a.run.attributes.priority! || a.part - b.part || a.run.seq - b.run.seq);
  }

  async close(): Promise<void> {
    await Promise.all([...this.#parts.keys()].map((part) => this.#drop(part)));
  }

  async #partExists(part: number): Promise<boolean> {
    const log = await this.#driver.openLog(partPath(this.#queue, part), { create: false });
    await log?.close();
    return log !== undefined;
  }

  /** The part's runs with what was appended since the last look; undefined while it has no file. */
  async #refresh(part: number): Promise<PartAttributeRuns | undefined> {
    let view = this.#parts.get(part);
    if (!view?.log) {
      const log = await openSharedLog(this.#driver, attributesPath(this.#queue, part), { create: false });
      if (!log) return view?.runs;
      view ??= { log, readAt: 0, runs: new PartAttributeRuns() };
      view.log = log;
      this.#parts.set(part, view);
    }
    const size = await view.log!.size();
    if (size > view.readAt) {
      const { frames, end } = readFrames(await view.log!.read(view.readAt, size - view.readAt));
      // The compaction's own marks (a 0 byte first) are no run.
      for (const { payload } of frames) if (payload[0] !== 0) view.runs.apply(payload);
      view.readAt += end; // a frame being appended now is read whole at the next look
    }
    return view.runs;
  }

  async #drop(part: number): Promise<void> {
    const view = this.#parts.get(part);
    this.#parts.delete(part);
    await view?.log?.close();
  }
}
