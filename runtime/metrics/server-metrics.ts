import { BATCH_BUCKETS, BYTES_BUCKETS, FSYNC_BUCKETS, Histogram, LATENCY_BUCKETS } from "./histogram";

/** The requests of one route and method: counts by status, and their latency. */
export class RouteSeries {
  readonly statuses = new Map<number, number>();
  readonly duration = new Histogram(LATENCY_BUCKETS);

  constructor(
    readonly method: string,
    /** The route's pattern (`/api/v1/queues/:queue/messages`), never the path: bounded label values. */
    readonly route: string,
  ) {}

  record(status: number, seconds: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    this.duration.observe(seconds);
  }
}

/** What storage a driver handle is: a part log or an info record. */
export type FileKind = "log" | "record";

/**
 * The server's own counters (requests, long polls, storage), kept as plain numbers and fixed
 * histograms so that recording costs a few additions; read only by a scrape. The queues'
 * series come from the Monitor's snapshot instead.
 */
export class ServerMetrics {
  readonly routes: RouteSeries[] = [];
  /** Consume and lease requests with a timeout > 0, waiting or answering now. */
  longPolls = 0;
  readonly openFiles: Record<FileKind, number> = { log: 0, record: 0 };
  readonly fsync: Record<FileKind, Histogram> = { log: new Histogram(FSYNC_BUCKETS), record: new Histogram(FSYNC_BUCKETS) };
  /** Bytes of each append to a part log (a write batch). */
  readonly appendBytes = new Histogram(BYTES_BUCKETS);
  /** Messages of each produce request. */
  readonly produceBatch = new Histogram(BATCH_BUCKETS);
  /** Produces refused because this instance's writer lock was taken over (E_FENCED): each a 503 the client retries. */
  fencedWrites = 0;
  /** Writer locks this instance lost to another (it was paused or cut off past its lease), found by a renewal, a check before a write, or a refused write: nothing acknowledged with them after. */
  writerLocksLost = 0;

  /** The series of a route and method, made once at registration. */
  route(method: string, route: string): RouteSeries {
    const series = new RouteSeries(method, route);
    this.routes.push(series);
    return series;
  }

  /** Counts a long poll in; returns its `done` (idempotent). */
  longPoll(): () => void {
    this.longPolls++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.longPolls--;
    };
  }
}
