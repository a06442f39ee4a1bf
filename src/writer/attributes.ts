/**
 * The writer's side of message attributes (format/attributes.ts): the runs of a batch's records
 * that carry attributes go to the part's `Q_attrs` before the records themselves, so that a
 * reader that has read a record finds its run. Records cut off after their runs were written (a
 * crash mid-batch, a rolled-back batch) get a CUT frame: the runs before it apply to no record
 * past the part's end at the cut.
 */
import type { DriverLock, QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { encodeAttributeCut, encodeAttributeRun, PartAttributeRuns, type AttributeRun, type MessageAttributes } from "../format/attributes";
import { attributesPath } from "../storage/paths";
import { SideLog } from "../storage/side-log";

export interface AttributeWriterOptions {
  driver: QueueDriver;
  queue: string;
  fence: DriverLock;
  sync: boolean;
  onProblem: (problem: QueueProblem) => void;
}

export class AttributeWriter {
  readonly #options: AttributeWriterOptions;
  /** The current part's file, opened at its first run (or at a cut). */
  #log: SideLog | undefined;
  #part = -1;
  /** The last seq a run in the current part's file names: past the part's end, a CUT is due. */
  #coveredTo = 0;
  /** Runs of the records encoded and not yet written out. */
  #runs: AttributeRun[] = [];
  /** The newest run's produce: a next record of the same one extends it. */
  #last: { attributes: MessageAttributes; seq: number } | undefined;

  constructor(options: AttributeWriterOptions) {
    this.#options = options;
  }

  /** A record encoded at `offset`/`seq` with `attributes` (the same object for one produce's records). */
  add(attributes: MessageAttributes, offset: number, seq: number, crc: number): void {
    const run = this.#runs.at(-1);
    if (run && this.#last?.attributes === attributes && this.#last.seq + 1 === seq) run.count++;
    else this.#runs.push({ offset, seq, count: 1, crc, attributes });
    this.#last = { attributes, seq };
  }

  /** Before the records encoded so far go to part `part`: their runs, as durable as the part will be. True when there were some. */
  async flush(part: number): Promise<boolean> {
    this.#last = undefined;
    if (this.#runs.length === 0) return false;
    const runs = this.#runs;
    this.#runs = [];
    const log = await this.#open(part);
    await log.append(runs.map(encodeAttributeRun), this.#options.sync);
    const newest = runs.at(-1)!;
    this.#coveredTo = newest.seq + newest.count - 1;
    return true;
  }

  /** Part `part` ends after record `count` now (recovered at open, or a batch rolled back): runs past it are cut. */
  async cut(part: number, count: number): Promise<void> {
    this.#runs = [];
    this.#last = undefined;
    const log = await this.#open(part);
    if (this.#coveredTo <= count) return;
    await log.append([encodeAttributeCut(count)], this.#options.sync);
    this.#coveredTo = count;
  }

  close(): Promise<void> {
    const log = this.#log;
    this.#log = undefined;
    this.#part = -1;
    return log ? log.close() : Promise.resolve();
  }

  async #open(part: number): Promise<SideLog> {
    if (this.#part === part && this.#log) return this.#log;
    await this.close();
    const { driver, queue, fence, onProblem } = this.#options;
    const { log, frames } = await SideLog.open(driver, attributesPath(queue, part), queue, onProblem, fence);
    const runs = new PartAttributeRuns();
    for (const { payload } of frames) runs.apply(payload);
    this.#log = log;
    this.#part = part;
    this.#coveredTo = runs.coveredTo;
    return log;
  }
}
