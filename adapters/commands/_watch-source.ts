/**
 * What `stat --watch` samples: a server's monitor (`--url`: `GET /api/v1/overview`, or the
 * queue's overview with a queue) or the files, through the same Monitor a server runs (rates
 * from the change between samples, computed in one place: runtime/monitor.ts). Both give one
 * `WatchView` per sample.
 */
import { VQueueClientError } from "../../client/index";
import type { QueueOverviewJSON } from "../../protocol/api";
import { Monitor } from "../../runtime/monitor";
import type { QueueSample } from "../../runtime/types";
import { resolveQueueAppOptions } from "../../runtime/options";
import { QueueRegistry } from "../../runtime/registry";
import { describeError } from "./_errors";
import { apiClient, log, openStorage } from "./_shared";

/** A queue's line of the table: the overview's fields (rates as the monitor gives them, the mean of its last few samples). */
export type WatchQueueRow = Pick<
  QueueOverviewJSON,
  "name" | "messages" | "bytes" | "parts" | "consumers" | "produceRate" | "consumeRate" | "maxLag" | "maxLagConsumer"
>;

/** A consumer's line (with a queue argument). */
export interface WatchConsumerRow {
  name: string;
  kind: "ordered" | "shared";
  part: number;
  position: number;
  lag: number;
  rate: number;
  /** Shared consumers: leases running (from its files when no server holds it); null for ordered ones. */
  inFlight: number | null;
}

export interface WatchView {
  /** When it was sampled here (ms since the epoch). */
  at: number;
  queues: WatchQueueRow[];
  /** With a queue argument: its consumers (empty while the queue does not exist). */
  consumers?: WatchConsumerRow[];
}

export interface WatchSource {
  sample(signal: AbortSignal): Promise<WatchView>;
  close(): Promise<void>;
}

/** Polls a server's monitor: the overview, or with `queue` that queue's overview. */
export function httpWatchSource(url: string, user: string | undefined, queue: string | undefined): WatchSource {
  const client = apiClient(url, user);
  return {
    async sample(signal) {
      if (queue === undefined) return { at: Date.now(), queues: (await client.overview({ signal })).queues.map(rowOfJSON) };
      const detail = await client.queueOverview(queue, { signal }).catch((error: unknown) => {
        // Watching a queue before it is made: an empty table until it is.
        if (error instanceof VQueueClientError && error.status === 404 && error.code === "E_NOT_FOUND") return undefined;
        throw error;
      });
      if (!detail) return { at: Date.now(), queues: [], consumers: [] };
      const consumers = detail.consumers.map((c): WatchConsumerRow => ({
        name: c.name,
        kind: c.kind,
        part: c.part,
        position: c.position,
        lag: c.lag,
        rate: c.rate,
        inFlight: c.inFlight ?? null,
      }));
      return { at: Date.now(), queues: [rowOfJSON(detail.queue)], consumers };
    },
    close: async () => {},
  };
}

/**
 * Samples the files in this process with the server's Monitor on a registry that opens nothing
 * (no writer, no consumer: no lock taken, a server may be running on the same files). Each
 * `sample` takes one now (`next()`); the monitor schedules none itself (`idleMs: 0`).
 */
export async function directWatchSource(target: { dir?: string; storage?: string }, queue: string | undefined, intervalMs: number): Promise<WatchSource> {
  const driver = await openStorage(target);
  // A sample that fails is told in one line, as the CLI tells errors, and the watch goes on.
  const tell = (...args: unknown[]) => log.warn(args.map((a) => (a instanceof Error ? (describeError(a) ?? a.message) : String(a))).join(" "));
  const options = resolveQueueAppOptions({ driver, logger: { error: tell, warn: tell }, monitor: { sampleMs: intervalMs, idleMs: 0 } });
  const registry = new QueueRegistry(options);
  await registry.driver(); // the registry owns the driver now: its close disposes it
  const monitor = new Monitor(registry, options.monitor, queue === undefined ? undefined : (name) => name === queue);
  return {
    async sample() {
      const snapshot = await monitor.next();
      const queues = queue === undefined ? snapshot.queues : snapshot.queues.filter((q) => q.name === queue);
      const view: WatchView = { at: Date.now(), queues: queues.map(rowOfSample) };
      if (queue !== undefined)
        view.consumers = (queues[0]?.consumers ?? []).map((c) => ({
          name: c.name,
          kind: c.kind,
          part: c.part,
          position: c.position,
          lag: c.lag,
          rate: c.rate,
          inFlight: c.shared?.inFlight ?? null,
        }));
      return view;
    },
    async close() {
      monitor.close();
      await registry.close();
    },
  };
}

function rowOfJSON(q: QueueOverviewJSON): WatchQueueRow {
  return {
    name: q.name,
    messages: q.messages,
    bytes: q.bytes,
    parts: q.parts,
    consumers: q.consumers,
    produceRate: q.produceRate,
    consumeRate: q.consumeRate,
    maxLag: q.maxLag,
    maxLagConsumer: q.maxLagConsumer,
  };
}

function rowOfSample(q: QueueSample): WatchQueueRow {
  return {
    name: q.name,
    messages: q.messages,
    bytes: q.bytes,
    parts: q.parts,
    consumers: q.consumers.length,
    produceRate: q.produceRate,
    consumeRate: q.consumeRate,
    maxLag: q.maxLag,
    maxLagConsumer: q.maxLagConsumer,
  };
}
