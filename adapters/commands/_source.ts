/**
 * Where `consume` and `tail` read from: the files (the engine's consumer) or a server (`--url`).
 * Both sides behave the same: `next` reads (and, following, waits), `commit` saves the position
 * after what was read, `close` ends the session.
 */
import { BATCH_CONTENT_TYPE, decodeBatch } from "../../protocol/binary";
import { QueueConsumer } from "../../src/consumer";
import type { StartPosition } from "../../src/options";
import { popInfoPath } from "../../src/paths";
import type { Printable } from "./_print";
import { explain, httpClient, openStorage, storageLabel } from "./_shared";

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
  const reader = await QueueConsumer.open(o.queue, o.consumer, { driver, start: o.from, create: true, syncCommits: !o.ephemeral }).catch(async (error: unknown) => {
    await driver.dispose?.();
    return explain(error, `Cannot open ${o.ephemeral ? "" : `consumer "${o.consumer}" of `}"${o.queue}" in ${storageLabel(target)}`);
  });
  return {
    async next(max, signal) {
      for (;;) {
        const batch = await reader.read({ max });
        if (batch.length > 0 || !o.follow || signal.aborted) return batch;
        await reader.wait({ signal });
      }
    },
    commit: async () => void (await reader.commit()),
    async close() {
      try {
        await reader.close();
        // The engine has no reader that keeps nothing: the consumer's position file goes with it.
        if (o.ephemeral) await driver.remove(popInfoPath(o.queue, o.consumer));
      } finally {
        await driver.dispose?.();
      }
    },
  };
}

/** The most messages asked for in one request (the server's default `maxMessages` is 10000). */
export const HTTP_BATCH = 1000;

/** Reads through a server (`--url`): long polls of binary batches, each committed by the next request. */
export async function openHttpSource(url: string, user: string | undefined, o: SourceOptions): Promise<MessageSource> {
  const call = httpClient(url, user);
  const queuePath = `/api/v1/queues/${encodeURIComponent(o.queue)}`;
  const base = `${queuePath}/consumers/${encodeURIComponent(o.consumer)}`;
  const poll = async (max: number, timeoutMs: number, commit: string | null, signal?: AbortSignal) => {
    const res = await call(`${base}/messages?max_messages=${max}&timeout_ms=${timeoutMs}${commit ? `&commit=${commit}` : ""}`, { headers: { accept: BATCH_CONTENT_TYPE }, signal });
    return { records: decodeBatch(new Uint8Array(await res.arrayBuffer())) as Printable[], cursor: res.headers.get("x-vq-cursor") };
  };
  // A new session: what an earlier client was handed and did not commit comes again.
  const rewind = () =>
    call(`${base}/rewind`, { method: "POST" }).catch((error: Error) => {
      if (!/ 404 /.test(error.message)) throw error; // a new consumer: nothing to rewind
    });
  const consumerLag = async (): Promise<number | undefined> => {
    const { consumers } = (await (await call(`${queuePath}/consumers`)).json()) as { consumers: { name: string; lag: number }[] };
    return consumers.find((c) => c.name === o.consumer)?.lag;
  };

  if (!o.ephemeral) await rewind();
  // The API has no per-request start: a new consumer starts where the server's `start` says
  // (the earliest message by default). For `latest`, its backlog is read and committed unprinted.
  if (o.from === "latest" && (o.ephemeral || (await consumerLag()) === undefined)) await skipBacklog(poll, consumerLag, (cursor) => call(`${base}/commit?cursor=${cursor}`, { method: "POST" }));

  let handedOut: string | null = null;
  let pending: string | null = null;
  return {
    async next(max, signal) {
      for (;;) {
        const got = await poll(max, o.follow ? 30_000 : 0, pending, signal).catch((error: Error) => {
          if (error.name === "AbortError") return undefined;
          throw error;
        });
        if (!got) return [];
        pending = null;
        if (got.cursor) handedOut = got.cursor;
        if (got.records.length > 0 || !o.follow) return got.records;
      }
    },
    // Sent with the next request (`?commit=`), or by close.
    commit: async () => void (pending = handedOut),
    async close() {
      if (o.ephemeral) return void (await call(base, { method: "DELETE" }));
      if (pending) await call(`${base}/commit?cursor=${pending}`, { method: "POST" });
      // A peek leaves the server's consumer where it was.
      if (!o.commit) await rewind();
    },
  };
}

type Poll = (max: number, timeoutMs: number, commit: string | null) => Promise<{ records: Printable[]; cursor: string | null }>;

/**
 * Moves a consumer just created through the API to the end of its queue: the first request
 * creates it (and hands out at most one message), its lag is then the backlog, which is read
 * and committed. Messages pushed in between those two requests are skipped too.
 */
async function skipBacklog(poll: Poll, lag: () => Promise<number | undefined>, commit: (cursor: string) => Promise<unknown>): Promise<void> {
  const first = await poll(1, 0, null);
  let cursor = first.cursor;
  let left = ((await lag()) ?? 0) - first.records.length;
  while (left > 0) {
    const got = await poll(Math.min(HTTP_BATCH, left), 0, cursor);
    if (got.records.length === 0) break;
    cursor = got.cursor ?? cursor;
    left -= got.records.length;
  }
  if (cursor) await commit(cursor);
}
