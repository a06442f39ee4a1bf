import { QueueConsumer } from "./consumer";
import type { QueueDriver } from "./driver";
import { VQueueError } from "./errors";
import type { Message, MessageInput } from "./message";
import { assertName } from "./names";
import { QueueWriter } from "./writer";

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
  return { deadLetter: 1, origin: { queue, consumer, part: message.part, offset: message.offset, seq: message.seq }, deliveries, error, type: message.type, data, at: Date.now() };
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
  return letter.type === "object" ? fromBase64(letter.data) : letter.data;
}

export interface RedriveOptions {
  /** Most messages moved by this call. @default 1000 */
  max?: number;
  /** The ordered consumer of the DLQ that remembers what was moved. @default "redrive" */
  consumer?: string;
  /** A writer of a target queue already open in this process (else one is opened, and closed after). */
  writer?: QueueWriter;
}

/**
 * Moves up to `max` messages from the dead-letter queue `dlq` back into `queue`, or, without
 * one, each into its dead letter's origin queue, as their original bodies (a message that is no
 * dead letter goes as it is, and only to a given `queue`). The targets are written, and made
 * durable, before the DLQ consumer commits: a crash in between moves some twice, never none.
 * Resolves with how many were moved.
 */
export async function redrive(driver: QueueDriver, dlq: string, queue: string | undefined, options: RedriveOptions = {}): Promise<number> {
  assertName(dlq, "queue");
  if (queue !== undefined) assertName(queue, "queue");
  const max = options.max ?? 1000;
  if (!Number.isInteger(max) || max < 1) throw new VQueueError("E_OPTION", `Invalid max ${String(max)}: use an integer from 1 up.`);
  const source = await QueueConsumer.open(dlq, options.consumer ?? "redrive", { driver, create: true, start: "earliest" });
  const writers = new Map<string, Promise<QueueWriter>>();
  const writerOf = (target: string) => {
    let writer = writers.get(target);
    if (!writer) writers.set(target, (writer = options.writer?.name === target ? Promise.resolve(options.writer) : QueueWriter.open(target, { driver })));
    return writer;
  };
  try {
    let moved = 0;
    while (moved < max) {
      const batch = await source.read({ max: Math.min(1000, max - moved) });
      if (batch.length === 0) break;
      // By target, in order: checked whole before anything is written.
      const byTarget = new Map<string, MessageInput[]>();
      for (const message of batch) {
        const letter = parseDeadLetter(message);
        const target = queue ?? letter?.origin.queue;
        if (target === undefined) throw new VQueueError("E_OPTION", `Message ${message.part}.${message.offset} of "${dlq}" is no dead letter: it has no origin queue, give the queue to move it to.`);
        assertName(target, "queue");
        const bodies = byTarget.get(target) ?? [];
        byTarget.set(target, bodies);
        bodies.push(letter ? originalBody(letter) : message.data);
      }
      for (const [target, bodies] of byTarget) await (await writerOf(target)).pushBatch(bodies);
      await source.commit();
      moved += batch.length;
    }
    return moved;
  } finally {
    for (const writer of writers.values()) {
      const opened = await writer.catch(() => undefined);
      if (opened && opened !== options.writer) await opened.close();
    }
    await source.close();
  }
}

// btoa/atob work on "binary strings": one char per byte. In pieces, to keep the argument lists short.
function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}
