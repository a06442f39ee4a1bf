import { QueueConsumer } from "../ordered/consumer";
import type { QueueDriver } from "../../core/driver";
import { VQueueError } from "../../core/errors";
import type { Message, MessageInput } from "../../format/message";
import { fromBase64, toBase64 } from "../../core/base64";
import { assertName } from "../../core/names";
import { QueueWriter } from "../../writer/writer";

/**
 * A dead letter: a message a shared consumer gave up on after `maxDeliveries`, pushed to its
 * dead-letter queue (a normal queue) as one JSON text record, since records have no headers:
 * the original body (text as is, bytes as base64) with where it came from, how often it was
 * delivered and the last error a worker gave. `redrive` pushes the original bodies back.
 */
export interface DeadLetter {
  deadLetter: 1;
  origin: { queue: string; consumer: string; part: number; offset: number; seq: number };
  deliveries: number;
  error?: string;
  type: Message["type"];
  /** The body: the text of a `string` message, base64 of an `object` (bytes) one. */
  data: string;
  /** When it was dead-lettered (ms since the epoch). */
  at: number;
}

export function deadLetterOf(queue: string, consumer: string, message: Message, deliveries: number, error: string | undefined): DeadLetter {
  const data = typeof message.data === "string" ? message.data : toBase64(message.data);
  return {
    deadLetter: 1,
    origin: { queue, consumer, part: message.part, offset: message.offset, seq: message.seq },
    deliveries,
    error,
    type: message.type,
    data,
    at: Date.now(),
  };
}

/** The dead letter in a DLQ message, or undefined when it is none (pushed there by hand). */
export function parseDeadLetter(message: Message): DeadLetter | undefined {
  if (typeof message.data !== "string") return undefined;
  try {
    const parsed = JSON.parse(message.data) as DeadLetter;
    return parsed && parsed.deadLetter === 1 && typeof parsed.data === "string" ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The original body of a dead letter, as `push` takes it back. */
export function originalBody(letter: DeadLetter): MessageInput {
  if (letter.type !== "object") return letter.data;
  const bytes = fromBase64(letter.data);
  if (!bytes)
    throw new VQueueError("E_MESSAGE", `A dead letter of ${letter.origin.queue} (${letter.origin.part}.${letter.origin.offset}) holds no valid base64 body.`);
  return bytes;
}

export interface RedriveOptions {
  /** Most messages moved by this call. @default 1000 */
  max?: number;
  /** The ordered consumer of the DLQ that remembers what was moved. @default "redrive" */
  consumer?: string;
  /** A writer of the target queue already open in this process (else one is opened, and closed after). */
  writer?: QueueWriter;
  /**
   * The writer of a target queue, owned by the caller (not closed here): a server passes its
   * own, and checks rights there. Called for every target of a batch before anything is written.
   */
  writerFor?: (queue: string) => Promise<QueueWriter>;
}

/**
 * Moves up to `max` messages from the dead-letter queue `dlq` back into `queue`, as their
 * original bodies (a message that is no dead letter goes as it is); with no `queue`, each dead
 * letter goes back to its origin queue (`E_OPTION` for a message that is no dead letter). The
 * targets are written, and made durable, before the DLQ consumer commits: a crash in between
 * moves some twice, never none. Resolves with how many were moved.
 */
export async function redrive(driver: QueueDriver, dlq: string, queue: string | undefined, options: RedriveOptions = {}): Promise<number> {
  assertName(dlq, "queue");
  if (queue !== undefined) assertName(queue, "queue");
  const max = options.max ?? 1000;
  if (!Number.isInteger(max) || max < 1) throw new VQueueError("E_OPTION", `Invalid max ${String(max)}: use an integer from 1 up.`);
  const source = await QueueConsumer.open(dlq, options.consumer ?? "redrive", { driver, create: true, start: "earliest" });
  const owned = new Map<string, Promise<QueueWriter>>();
  const writerFor = (target: string): Promise<QueueWriter> => {
    if (options.writerFor) return options.writerFor(target);
    if (options.writer && target === queue) return Promise.resolve(options.writer);
    let writer = owned.get(target);
    if (!writer) owned.set(target, (writer = QueueWriter.open(target, { driver })));
    return writer;
  };
  try {
    let moved = 0;
    while (moved < max) {
      const batch = await source.read({ max: Math.min(1000, max - moved) });
      if (batch.length === 0) break;
      // Grouped by target, in queue order within each; every writer first (a refusal writes nothing).
      const groups = new Map<string, MessageInput[]>();
      for (const message of batch) {
        const letter = parseDeadLetter(message);
        const target = queue ?? letter?.origin.queue;
        if (target === undefined)
          throw new VQueueError(
            "E_OPTION",
            `Message ${message.part}.${message.seq} of "${dlq}" is no dead letter, so it has no origin queue: give the queue to redrive to.`,
          );
        assertName(target, "queue");
        let group = groups.get(target);
        if (!group) groups.set(target, (group = []));
        group.push(letter ? originalBody(letter) : message.data);
      }
      const writers = await Promise.all([...groups.keys()].map(writerFor));
      await Promise.all([...groups.values()].map((bodies, i) => writers[i]!.pushBatch(bodies)));
      await source.commit();
      moved += batch.length;
    }
    return moved;
  } finally {
    for (const writer of owned.values()) await writer.then((w) => w.close()).catch(() => {});
    await source.close();
  }
}
