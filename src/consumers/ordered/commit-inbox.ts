/**
 * Commits of an ordered consumer's partition taken by an instance that does not hold it (Nitro's
 * `node-cluster` hands each connection to any worker; a partition is handed over between a
 * batch and its commit): written into the partition consumer's inbox (consumers/state/ack-inbox.ts, `C` lines)
 * and applied by its holder, at open (before it hands anything out) and at the inbox pace
 * (consumers/state/inbox-pace.ts).
 * Commits only move forward, so applying the furthest one that names a message end is all of it.
 */
import { answerInbox, DONE, inboxItems, readInbox, refusal, type InboxCommit, type Verdict } from "../state/ack-inbox";
import type { QueueConsumer } from "./consumer";
import { comparePositions, formatCursor, type ConsumerPosition } from "../../format/position";
import type { QueueDriver } from "../../core/driver";
import { VQueueError } from "../../core/errors";
import { withSharedLog } from "../../storage/handles";
import { partPath } from "../../storage/paths";

/**
 * Applies the commits in `consumer`'s inbox and answers each (done once committed there or
 * beyond; a commit that names no message end is refused, `E_CURSOR`); an I/O failure leaves the
 * files for the next round. Resolves with the number of inbox files read.
 */
export async function applyInboxCommits(consumer: QueueConsumer): Promise<number> {
  const { driver, onProblem } = consumer.options;
  const read = await readInbox(driver, consumer.queue, consumer.name, onProblem);
  const commits = inboxItems(read).filter((item): item is InboxCommit => item.kind === "commit");
  const refused = new Map<InboxCommit, Verdict>();
  // The furthest first; one that names no message end of this partition (a client's mistake) is told and passed over.
  for (const item of commits.sort((a, b) => comparePositions(b.position, a.position))) {
    if (comparePositions(item.position, consumer.committed) <= 0) break;
    try {
      await consumer.commit(formatCursor(item.position));
      break;
    } catch (error) {
      if (!VQueueError.isError(error) || error.code !== "E_CURSOR") throw error;
      refused.set(item, refusal(error));
      onProblem({
        code: "BAD_INFO",
        queue: consumer.queue,
        consumer: consumer.name,
        message: `A commit another instance took for consumer "${consumer.name}" was dropped: ${error.message}`,
      });
    }
  }
  const decided = new Map(commits.map((item) => [item, refused.get(item) ?? DONE]));
  await answerInbox(driver, read, decided, consumer.lock);
  return read.files.length;
}

/**
 * Refuses (`E_CURSOR`) a commit for partition `queue` that cannot name one of its messages: its
 * part does not exist or is shorter. (Whether it names a message end is checked by the holder.)
 */
export async function assertCommitFits(driver: QueueDriver, queue: string, position: ConsumerPosition): Promise<void> {
  const size = await withSharedLog(driver, partPath(queue, position.part), (log) => log.size());
  if (size === undefined || position.position > size) {
    throw new VQueueError("E_CURSOR", `Cannot commit ${formatCursor(position)}: queue "${queue}" has no message that ends there.`);
  }
}
