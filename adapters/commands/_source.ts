/**
 * Where `consume` and `tail` read from: the files (the engine's consumer) or a server (`--url`).
 * Both sides behave the same: `next` reads (and, following, waits), `commit` saves the position
 * after what was read, `close` ends the session.
 */
import { VQueueClientError, isAbortError, type ClientMessage, type ConsumeResult, type VQueueClient } from "../../client/index";
import type { OrderedConsumer } from "../../src/consumers/types";
import { deleteConsumer } from "../../src/admin/delete";
import { openOrderedConsumer } from "../../src/open-consumer";
import { neverWritten, partitionNames, readPartitions } from "../../src/partitions/declaration";
import type { QueueDriver } from "../../src/core/driver";
import type { StartPosition } from "../../src/options/queue";
import { popInfoPath } from "../../src/storage/paths";
import type { Printable } from "./_print";
import { apiClient, cliZstd, explain, log, openStorage, plural, storageLabel } from "./_shared";

export interface MessageSource {
  /** Up to `max` messages; `[]` when there are none (following: only once `signal` is aborted). */
  next(max: number, signal: AbortSignal): Promise<Printable[]>;
  /** Saves the position after everything `next` returned. */
  commit(): Promise<void>;
  /** Ends the session; an ephemeral consumer is deleted. */
  close(): Promise<void>;
}

export interface SourceOptions {
  queue: string;
  consumer: string;
  /** Where the consumer starts when it has no saved position. */
  from: StartPosition;
  follow: boolean;
  /** false: a peek, the saved position is left as it was. */
  commit: boolean;
  /** A throwaway consumer (tail): deleted on close, its position never fsync'd. */
  ephemeral: boolean;
}

/** Reads on the files (`--dir`/`--storage`) through the engine's consumer. */
export async function openDirectSource(target: { dir?: string; storage?: string }, o: SourceOptions): Promise<MessageSource> {
  const driver = await openStorage(target);
  let partitions: number | undefined;
  // A throwaway consumer, deleted on close: a tail's, or a peek's under a name with no saved position.
  let throwaway = o.ephemeral;
  // A partitioned queue: every partition no server holds (one held elsewhere is that server's to read).
  const open = async (): Promise<OrderedConsumer> => {
    partitions = await readPartitions(driver, o.queue);
    if (!o.commit && !throwaway) throwaway = !(await hasSavedPosition(driver, o.queue, o.consumer, partitions));
    const options = { driver, start: o.from, create: true, syncCommits: !throwaway, zstd: cliZstd };
    return openOrderedConsumer(o.queue, o.consumer, options);
  };
  const reader = await open().catch(async (error: unknown) => {
    await driver.dispose?.();
    return explain(error, `Cannot open ${o.ephemeral ? "" : `consumer "${o.consumer}" of `}"${o.queue}" in ${storageLabel(target)}`);
  });
  return {
    // Following waits as long as it takes (until the signal); otherwise what is there now.
    next: (max, signal) => reader.poll({ max, signal, timeoutMs: o.follow ? undefined : 0 }),
    commit: async () => void (await reader.commit()),
    async close() {
      try {
        await reader.close();
        // The engine has no reader that keeps nothing: the consumer's position files go with it.
        if (throwaway && partitions !== undefined) await deleteConsumer(driver, o.queue, o.consumer).catch(neverWritten);
        else if (throwaway) await driver.remove(popInfoPath(o.queue, o.consumer));
      } finally {
        await driver.dispose?.();
      }
    },
  };
}

/** Whether `consumer` has a saved position (in a partition, for a partitioned queue). */
async function hasSavedPosition(driver: QueueDriver, queue: string, consumer: string, partitions: number | undefined): Promise<boolean> {
  for (const name of partitions === undefined ? [queue] : partitionNames(queue, partitions)) {
    if ((await driver.readRecord(popInfoPath(name, consumer))) !== undefined) return true;
  }
  return false;
}

/** The most messages asked for in one request (the server's default `maxMessages` is 10000). */
export const HTTP_BATCH = 1000;

/** Reads through a server (`--url`) with the client SDK: long polls of binary batches, each committed by the next request. */
export async function openHttpSource(url: string, user: string | undefined, o: SourceOptions): Promise<MessageSource> {
  const client = apiClient(url, user);
  const { queue, consumer } = o;
  const poll: Poll = (max, timeoutMs, commit, signal) => client.consume(queue, consumer, { format: "binary", maxMessages: max, timeoutMs, commit, signal });
  // A new session: what an earlier client was handed and did not commit comes again.
  const rewind = () =>
    client.rewind(queue, consumer).catch((error: unknown) => {
      if (!(error instanceof VQueueClientError && error.code === "E_NOT_FOUND")) throw error; // a new consumer: nothing to rewind
    });
  const consumerLag = async (): Promise<number | undefined> => (await client.consumers(queue)).consumers.find((c) => c.name === consumer)?.lag;

  // A peek under a name the server does not know yet: the consumer it makes goes on close.
  const throwaway = !o.ephemeral && !o.commit && (await consumerLag()) === undefined;
  if (!o.ephemeral) await rewind();
  // The API has no per-request start: a new consumer starts where the server's `start` says
  // (the earliest message by default). For `latest`, its backlog is read and committed unprinted.
  if (o.from === "latest" && (o.ephemeral || (await consumerLag()) === undefined))
    await skipBacklog(poll, consumerLag, (cursor) => client.commit(queue, consumer, cursor));
  if (o.ephemeral) return subscribeSource(client, o);

  let handedOut: string | undefined;
  let pending: string | undefined;
  return {
    async next(max, signal) {
      for (;;) {
        const got = await poll(max, o.follow ? 30_000 : 0, pending, signal).catch((error: unknown) => {
          if (isAbortError(error)) return undefined;
          throw error;
        });
        if (!got) return [];
        pending = undefined;
        if (got.cursor) handedOut = got.cursor;
        // As the engine's MISSED line says it on the files: never silent.
        if (got.missed > 0)
          log.warn(`Consumer "${consumer}" missed ${plural(got.missed, "message")} of "${queue}": retention deleted them before they were read.`);
        if (got.messages.length > 0 || !o.follow) return got.messages;
      }
    },
    // Sent with the next request (`?commit=`), or by close.
    commit: async () => void (pending = handedOut),
    async close() {
      if (pending) await client.commit(queue, consumer, pending);
      if (throwaway) await deletePeeked(client, queue, consumer);
      // A peek leaves the server's consumer where it was.
      else if (!o.commit) await rewind();
    },
  };
}

/** Deletes the consumer a peek made; a user without the admin right it takes is told what is left. */
async function deletePeeked(client: VQueueClient, queue: string, consumer: string): Promise<void> {
  await client.deleteConsumer(queue, consumer).catch((error: unknown) => {
    if (!(error instanceof VQueueClientError && error.code === "E_FORBIDDEN")) throw error;
    log.warn(`The peek left consumer "${consumer}" of "${queue}" on the server: deleting it takes the admin right (${error.message}).`);
  });
}

/**
 * A tail through a server: the client's subscribe loop on a throwaway consumer (already at the
 * end of the queue), one message per `next`, and the consumer deleted on close.
 */
function subscribeSource(client: VQueueClient, o: SourceOptions): MessageSource {
  let messages: AsyncGenerator<ClientMessage, void, undefined> | undefined;
  return {
    async next(max, signal) {
      // A lost server ends the tail with its error, as it always did, rather than a silent
      // reconnect loop: a throw in onReconnect ends subscribe with it.
      messages ??= client.subscribe(o.queue, o.consumer, {
        signal,
        format: "binary",
        maxMessages: max,
        pollTimeoutMs: 30_000,
        onReconnect: (error) => {
          throw error;
        },
      });
      const got = await messages.next();
      return got.done ? [] : [got.value];
    },
    // Nothing to keep: the consumer goes with close.
    commit: async () => {},
    async close() {
      try {
        await messages?.return();
      } finally {
        await client.deleteConsumer(o.queue, o.consumer);
      }
    },
  };
}

type Poll = (max: number, timeoutMs: number, commit: string | undefined, signal?: AbortSignal) => Promise<ConsumeResult>;

/**
 * Moves a consumer just created through the API to the end of its queue: the first request
 * creates it (and hands out at most one message), its lag is then the backlog, which is read
 * and committed. Messages pushed in between those two requests are skipped too.
 */
async function skipBacklog(poll: Poll, lag: () => Promise<number | undefined>, commit: (cursor: string) => Promise<unknown>): Promise<void> {
  const first = await poll(1, 0, undefined);
  let cursor = first.cursor;
  let left = ((await lag()) ?? 0) - first.messages.length;
  while (left > 0) {
    const got = await poll(Math.min(HTTP_BATCH, left), 0, cursor);
    if (got.messages.length === 0) break;
    cursor = got.cursor ?? cursor;
    left -= got.messages.length;
  }
  if (cursor) await commit(cursor);
}
