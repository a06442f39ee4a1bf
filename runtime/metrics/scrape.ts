import type { Principal } from "../auth";
import { can } from "../auth";
import type { ConsumerSample, MonitorSnapshot, ProcessStats, QueueSample } from "../types";
import { Exposition, labelPairs, labels, type MetricType } from "./exposition";
import type { ServerMetrics } from "./server-metrics";

const QUEUE_SERIES: [string, MetricType, string, (q: QueueSample) => number][] = [
  ["vqueue_queue_messages", "gauge", "Messages in the queue's parts on storage.", (q) => q.messages],
  ["vqueue_queue_bytes", "gauge", "Bytes of the queue's parts on storage.", (q) => q.bytes],
  ["vqueue_queue_parts", "gauge", "Parts of the queue on storage.", (q) => q.parts],
  [
    "vqueue_produced_messages_total",
    "counter",
    "Messages produced to the queue since this server first sampled it (a scrape or a dashboard view starts the sampling; a queue that appears later counts from its first message).",
    (q) => q.producedTotal,
  ],
  ["vqueue_produced_bytes_total", "counter", "Bytes produced to the queue since this server first sampled it.", (q) => q.producedBytesTotal],
];

const CONSUMER_SERIES: [string, MetricType, string, (c: ConsumerSample) => number][] = [
  [
    "vqueue_consumer_consumed_messages_total",
    "counter",
    "Messages the consumer moved past (committed or acked) since this server first sampled it.",
    (c) => c.consumedTotal,
  ],
  ["vqueue_consumer_consumed_bytes_total", "counter", "Bytes the consumer moved past since this server first sampled it.", (c) => c.consumedBytesTotal],
  ["vqueue_consumer_lag_messages", "gauge", "Messages of the queue the consumer has not consumed yet.", (c) => c.lag],
  ["vqueue_consumer_lag_bytes", "gauge", "Bytes of the queue the consumer has not consumed yet.", (c) => c.lagBytes],
];

const SHARED_SERIES: [string, MetricType, string, (s: NonNullable<ConsumerSample["shared"]>) => number][] = [
  ["vqueue_consumer_in_flight_messages", "gauge", "Messages of a shared consumer leased and not yet acked.", (s) => s.inFlight],
  ["vqueue_consumer_redelivered_total", "counter", "Messages a shared consumer handed out again (lease ran out or nacked).", (s) => s.redelivered],
  [
    "vqueue_consumer_dead_lettered_total",
    "counter",
    "Messages a shared consumer moved to its dead-letter queue since it was created (kept in its files: the count goes on across restarts).",
    (s) => s.deadLettered,
  ],
  [
    "vqueue_consumer_rate_limited",
    "gauge",
    "1 while a shared consumer held by this server hands nothing out: backing off, or its rate limit's window spent.",
    (s) => (s.limited ? 1 : 0),
  ],
];

/**
 * The queue and consumer series of a sample with every queue readable, written once per sample:
 * scrapes and dashboards between two samples (one per `sampleMs`) get the same text, and 10,000
 * consumers' lines cost their rendering (and its garbage) once, not on each request.
 */
const renderedSamples = new WeakMap<MonitorSnapshot, string>();

/**
 * One scrape: the queues and consumers of the Monitor's last sample that `principal` may read
 * (no storage I/O here), then the server's own series and the host's.
 */
export function renderMetrics(snapshot: MonitorSnapshot, server: ServerMetrics, principal: Principal | undefined, process?: ProcessStats): string {
  // A partitioned queue by partition (label `partition`), not its summed row: sum() over them gives it, without counting twice.
  const rows = snapshot.queues.filter((q) => q.partitions === undefined);
  const queues = rows.filter((q) => can(principal, "read", q.partitionOf?.queue ?? q.name));
  const every = queues.length === rows.length;
  let sampled = every ? renderedSamples.get(snapshot) : undefined;
  if (sampled === undefined) {
    const pending = snapshot.pending?.filter((queue) => can(principal, "read", queue)).length ?? 0;
    sampled = sampleSeries(snapshot, queues, pending);
    if (every) renderedSamples.set(snapshot, sampled);
  }
  const out = new Exposition(sampled);
  serverSeries(out, server);
  if (process) processSeries(out, process);
  return out.text();
}

/** The series of `queues` (of `snapshot`), when they were sampled, and how many queues the user may read are `pending`. */
function sampleSeries(snapshot: MonitorSnapshot, queues: QueueSample[], pending: number): string {
  const out = new Exposition();
  const queueLabel = (q: QueueSample): Record<string, string> =>
    q.partitionOf ? { queue: q.partitionOf.queue, partition: String(q.partitionOf.partition) } : { queue: q.name };
  const queuePairs = queues.map((q) => labelPairs(queueLabel(q)));
  // Written once per consumer, with its queue's pairs written once per queue: a label set serves every family.
  const consumers = queues.flatMap((q, i) => q.consumers.map((c) => ({ c, labels: `{${queuePairs[i]},${labelPairs({ consumer: c.name, kind: c.kind })}}` })));

  for (const [name, type, help, value] of QUEUE_SERIES) {
    out.family(name, type, help);
    queues.forEach((q, i) => out.sample(name, `{${queuePairs[i]}}`, value(q)));
  }
  for (const [name, type, help, value] of CONSUMER_SERIES) {
    out.family(name, type, help);
    for (const { c, labels: set } of consumers) out.sample(name, set, value(c));
  }
  for (const [name, type, help, value] of SHARED_SERIES) {
    out.family(name, type, help);
    for (const { c, labels: set } of consumers) if (c.shared) out.sample(name, set, value(c.shared));
  }
  out
    .family("vqueue_monitor_sample_timestamp_seconds", "gauge", "When the queue series above were sampled (Unix time).")
    .sample("vqueue_monitor_sample_timestamp_seconds", "", snapshot.at / 1000);
  out
    .family(
      "vqueue_monitor_queues_pending",
      "gauge",
      "Queues not sampled yet since the start, whose series are absent until they are (only while the first sample runs; 0 after).",
    )
    .sample("vqueue_monitor_queues_pending", "", pending);
  return out.text();
}

function serverSeries(out: Exposition, server: ServerMetrics): void {
  out.family("vqueue_http_requests_total", "counter", "HTTP requests answered, by route pattern, method and status (/health and unrouted paths not counted).");
  for (const series of server.routes) {
    for (const [status, count] of series.statuses)
      out.sample("vqueue_http_requests_total", labels({ route: series.route, method: series.method, status: String(status) }), count);
  }
  out.family("vqueue_http_request_duration_seconds", "histogram", "Time to answer an HTTP request (until its response starts; long polls include their wait).");
  for (const series of server.routes) {
    if (series.duration.count > 0)
      out.histogram("vqueue_http_request_duration_seconds", labelPairs({ route: series.route, method: series.method }), series.duration);
  }
  out
    .family("vqueue_http_long_polls_in_flight", "gauge", "Consume and lease requests with a timeout > 0 in progress (parked or answering).")
    .sample("vqueue_http_long_polls_in_flight", "", server.longPolls);
  out
    .family(
      "vqueue_fenced_writes_total",
      "counter",
      "Produces refused because another instance took this one's writer lock over (E_FENCED, answered 503 with Retry-After).",
    )
    .sample("vqueue_fenced_writes_total", "", server.fencedWrites);
  out
    .family(
      "vqueue_writer_locks_lost_total",
      "counter",
      "Writer locks this instance lost to another (it was paused or cut off past its lease), found by a renewal, a check before a write, or a refused write: nothing was acknowledged with them after.",
    )
    .sample("vqueue_writer_locks_lost_total", "", server.writerLocksLost);
  out.family("vqueue_produce_batch_messages", "histogram", "Messages per produce request.").histogram("vqueue_produce_batch_messages", "", server.produceBatch);
  out.family("vqueue_storage_open_files", "gauge", "Storage handles open (part logs and info records; shared by every reader in the process).");
  for (const kind of ["log", "record"] as const) out.sample("vqueue_storage_open_files", labels({ file: kind }), server.openFiles[kind]);
  out.family("vqueue_storage_fsync_duration_seconds", "histogram", "Time of each sync (fdatasync) of a part log or an info record.");
  for (const kind of ["log", "record"] as const) out.histogram("vqueue_storage_fsync_duration_seconds", labelPairs({ file: kind }), server.fsync[kind]);
  out
    .family("vqueue_storage_append_bytes", "histogram", "Bytes of each append to a part log (one write batch).")
    .histogram("vqueue_storage_append_bytes", "", server.appendBytes);
}

const PROCESS_SERIES: [keyof ProcessStats, string, MetricType, string][] = [
  ["openFds", "process_open_fds", "gauge", "Number of open file descriptors."],
  ["maxFds", "process_max_fds", "gauge", "Maximum number of open file descriptors."],
  ["residentMemoryBytes", "process_resident_memory_bytes", "gauge", "Resident memory size in bytes."],
  ["cpuSecondsTotal", "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds."],
  ["startTimeSeconds", "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds."],
];

function processSeries(out: Exposition, stats: ProcessStats): void {
  for (const [key, name, type, help] of PROCESS_SERIES) {
    const value = stats[key];
    if (value !== undefined) out.family(name, type, help).sample(name, "", value);
  }
}
