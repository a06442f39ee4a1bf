import type { QueueDriver, RecordFile } from "../core/driver";
import { parseQueueInfo } from "../format/info";
import { openSharedRecord } from "../storage/handles";
import { queueInfoPath } from "../storage/paths";
import { listParts, readInfoLine } from "./recovery";

/** At most one directory listing a second looks for parts that a dead writer's queue line does not name. */
const DIR_CHECK_MS = 1000;

/**
 * Whether a queue has a part newer than the one a reader is on: its writer moved on. The
 * queue info line says so while a writer lives; a line missing or damaged, or one that may lag
 * (its writer gone), leaves it to the part directories.
 */
export class NewerPartCheck {
  readonly #driver: QueueDriver;
  readonly #queue: string;
  // Shared with the writer and the other consumers in this process (storage/handles.ts).
  #queueInfoFile: RecordFile | undefined;
  #dirCheckedAt = 0;

  constructor(driver: QueueDriver, queue: string) {
    this.#driver = driver;
    this.#queue = queue;
  }

  /** Whether a part after `part` exists; `writerGone` is asked only when the queue line may lag. */
  async exists(part: number, writerGone: () => Promise<boolean>): Promise<boolean> {
    const file = (this.#queueInfoFile ??= await openSharedRecord(this.#driver, queueInfoPath(this.#queue), { create: false }));
    const info =
      file &&
      (
        await readInfoLine(
          () => file.read(),
          (text) => parseQueueInfo(text, this.#queue),
        )
      ).value;
    if (info && info.part > part) return true;
    // The line is missing or damaged, or (once the writer is gone) may lag: ask the directory.
    if (info) {
      if (Date.now() - this.#dirCheckedAt < DIR_CHECK_MS || !(await writerGone())) return false;
      this.#dirCheckedAt = Date.now();
    }
    return (await listParts(this.#driver, this.#queue)).some((id) => id > part);
  }

  /** The reader is on another part: the directory may be asked at once. */
  reset(): void {
    this.#dirCheckedAt = 0;
  }

  close(): Promise<void> | undefined {
    const file = this.#queueInfoFile;
    this.#queueInfoFile = undefined;
    return file?.close();
  }
}
