import type { DriverLock } from "../../core/driver";
import { VQueueError, type QueueProblem } from "../../core/errors";
import type { ConsumerPosition } from "../../format/position";
import type { ResolvedConsumerOptions } from "../../options/queue";
import { listParts, readQueueInfo } from "../../log/recovery";
import { checkSavedPosition, startPosition } from "../../log/position-check";
import type { PositionFile } from "../state/position-file";
import { checkConsumerKind, type ConsumerKind } from "../kind";

export interface OpeningPositionOptions {
  queue: string;
  name: string;
  options: ResolvedConsumerOptions;
  kind: ConsumerKind;
  /** The consumer's lock, taken: the fence of the files written here. */
  lock: DriverLock;
  positionFile: PositionFile;
  onProblem: (problem: QueueProblem) => void;
}

/**
 * Where a consumer opens: its saved position, checked against the parts (moved past deleted
 * ones, or to the `start` position when it names no record), or the `start` position for a new
 * consumer, which is saved. `reset`: the saved position was not trusted (`BAD_POSITION`).
 */
export async function openingPosition(opening: OpeningPositionOptions): Promise<{ position: ConsumerPosition; reset: boolean }> {
  const { queue, name, kind, lock, positionFile } = opening;
  const { driver, create, start, syncCommits } = opening.options;
  let reset = false;
  let missed = 0;
  const onProblem = (problem: QueueProblem): void => {
    if (problem.code === "MISSED") missed += problem.missed ?? 0;
    opening.onProblem(problem);
  };
  const parts = await listParts(driver, queue);
  const info = await readQueueInfo(driver, queue, onProblem);
  if (!info && parts.length === 0) throw new VQueueError("E_NOT_FOUND", `Queue "${queue}" does not exist.`);
  const startAt = () => startPosition(driver, queue, start, parts, info?.part);
  const loaded = await positionFile.load();
  if (loaded === "missing" && !create) throw new VQueueError("E_NOT_FOUND", `Consumer "${name}" of queue "${queue}" does not exist.`);
  await checkConsumerKind(driver, queue, name, kind, loaded === "missing", syncCommits, lock);
  if (loaded === "unreadable") {
    reset = true;
    onProblem({
      code: "BAD_POSITION",
      queue,
      message: `Saved position of consumer "${name}" is unreadable; starting at the ${start} position.`,
    });
  }
  if (typeof loaded === "object") {
    const position = await checkSavedPosition(driver, queue, name, loaded, { parts, infoPart: info?.part }, onProblem, startAt, () => (reset = true));
    // Told once: the position past the deleted parts is saved, so a reopen does not tell it again.
    if (missed > 0) await positionFile.save(position);
    return { position, reset };
  }
  const position = await startAt();
  await positionFile.save(position);
  return { position, reset };
}
