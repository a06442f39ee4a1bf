import type { ResolvedSharedOptions } from "../../options/shared";
import { QueueWriter } from "../../writer/writer";
import { deadLetterOf } from "./dead-letter";
import type { SharedJournal } from "./journal";
import type { WindowEntry } from "./window";

/** The consumer whose messages are moved: what the move reads of it, and the two calls it makes. */
export interface DeadLetteringConsumer {
  readonly queue: string;
  readonly name: string;
  readonly options: ResolvedSharedOptions;
  readonly journal: SharedJournal;
  /** A new lease id: the message holds it while it moves. */
  lease: () => number;
  /** Acknowledges the entry, with `line` in the same journal write. */
  ack: (entry: WindowEntry, line: string) => Promise<void>;
}

/**
 * Moves a shared consumer's messages to its dead-letter queue (`options.deadLetterQueue`, as
 * dead-letter.ts writes them) once they are due past `maxDeliveries`, or nacked with
 * `deadLetter`: pushed there, then acknowledged here, each move counted in the journal.
 */
export class DeadLettering {
  readonly #consumer: DeadLetteringConsumer;
  /** The dead-letter queue's writer, opened at the first move (and again after a failed one). */
  #writer: Promise<QueueWriter> | undefined;

  constructor(consumer: DeadLetteringConsumer) {
    this.#consumer = consumer;
  }

  /** Pushes a message to the dead-letter queue, then acknowledges it here (a crash in between: it may go twice). */
  async move(entry: WindowEntry): Promise<void> {
    const { queue, name, options, journal } = this.#consumer;
    const message = entry.message!;
    entry.state = "leased";
    entry.until = Infinity; // held: no poll hands it out while it moves
    entry.lease = this.#consumer.lease();
    try {
      const { driver, onProblem, zstd, syncCommits, deadLetterQueue } = options;
      const writer = await (this.#writer ??= QueueWriter.open(deadLetterQueue, { driver, onProblem, zstd, durability: syncCommits ? "fsync" : "none" }));
      await writer.push(JSON.stringify(deadLetterOf(queue, name, message, entry.deliveries, entry.error)));
    } catch (error) {
      this.#writer = undefined;
      // No ack can come meanwhile (SharedLeases.ackRefusal: it is moving): it is due again.
      entry.state = "ready";
      entry.until = 0;
      throw error;
    }
    await this.#consumer.ack(entry, journal.countDeadLetter());
  }

  /** `move`, for a poll: a failure is told, and false (not handed out either: it stays due, and the next poll tries again). */
  async tryMove(entry: WindowEntry): Promise<boolean> {
    try {
      await this.move(entry);
      return true;
    } catch (error) {
      const { queue, name, options } = this.#consumer;
      const why = error instanceof Error ? error.message : String(error);
      options.onProblem({
        code: "DEAD_LETTER_FAILED",
        queue,
        consumer: name,
        part: entry.end.part,
        message: `Shared consumer "${name}" could not move ${entry.key} to "${options.deadLetterQueue}" (${why}); trying again at the next poll.`,
      });
      return false;
    }
  }

  /** Closes the dead-letter queue's writer, if one was opened. */
  async close(): Promise<void> {
    const writer = await this.#writer?.catch(() => undefined);
    await writer?.close().catch(() => {});
  }
}
