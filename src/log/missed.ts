import type { ConsumerPosition } from "../format/position";
import type { QueueDriver } from "../core/driver";
import type { QueueProblem } from "../core/errors";
import { missedBetween, readPruned } from "./pruned";

/**
 * Tells a consumer that goes on at part `next` from `from` (its saved or reading position)
 * what retention deleted before it read it: a `MISSED` problem with the exact count from
 * `Q_info_pruned` ("at least" when a part in between is older than that record keeps).
 * Resolves whether `from`'s part was deleted by retention (then the move is no damage).
 * A consumer at the very end of a deleted part, with nothing deleted after it, missed nothing.
 */
export async function reportMissed(
  driver: QueueDriver,
  queue: string,
  consumer: string,
  from: ConsumerPosition,
  next: number,
  onProblem: (problem: QueueProblem) => void,
): Promise<boolean> {
  const pruned = await readPruned(driver, queue);
  if (pruned.size === 0) return false;
  const { missed, exact } = missedBetween(pruned, from, next);
  if (missed > 0) {
    onProblem({
      code: "MISSED",
      queue,
      consumer,
      part: from.part,
      missed,
      message: `Consumer "${consumer}" missed ${exact ? "" : "at least "}${missed} message${missed === 1 ? ": retention deleted it" : "s: retention deleted them"} (part ${from.part}${next - 1 > from.part ? ` to ${next - 1}` : ""}) before it read them; going on at part ${next}.`,
    });
  }
  return pruned.has(from.part);
}
