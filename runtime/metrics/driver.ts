import type { LogFile, QueueDriver, RecordFile } from "../../src/core/driver";
import type { FileKind, ServerMetrics } from "./server-metrics";

/** The driver's optional methods: copied when present, left absent when not (the engine checks for them). */
const OPTIONAL = ["isLocked", "sizeOf", "writeAtomic", "syncDir", "watch", "dispose"] as const;

/**
 * `driver` with its open log and record handles counted, their fsyncs timed and appends
 * measured. Everything else passes straight through: the same `name` and `storageKey` (the
 * engine shares handles and wake-ups by it), and each optional method present exactly when
 * the wrapped driver has it.
 */
export function instrumentDriver(driver: QueueDriver, metrics: ServerMetrics): QueueDriver {
  const wrapped: QueueDriver = {
    name: driver.name,
    storageKey: driver.storageKey,
    openLog: async (path, options) => {
      const log = await driver.openLog(path, options);
      return log && instrumentLog(log, metrics);
    },
    openRecord: async (path, options) => {
      const record = await driver.openRecord(path, options);
      return record && instrumentRecord(record, metrics);
    },
    readRecord: (path) => driver.readRecord(path),
    list: (dir) => driver.list(dir),
    mkdir: (dir) => driver.mkdir(dir),
    remove: (path, fence) => driver.remove(path, fence),
    lock: (path) => driver.lock(path),
  };
  for (const key of OPTIONAL) {
    const method = driver[key];
    if (typeof method === "function") (wrapped as unknown as Record<string, unknown>)[key] = method.bind(driver);
  }
  return wrapped;
}

function instrumentLog(log: LogFile, metrics: ServerMetrics): LogFile {
  const close = opened(metrics, "log");
  return {
    size: () => log.size(),
    read: (position, length) => log.read(position, length),
    append: (at, data, fence) => {
      metrics.appendBytes.observe(data.length);
      return log.append(at, data, fence);
    },
    truncate: (length, fence) => log.truncate(length, fence),
    sync: () => timedSync(log, metrics, "log"),
    close: () => close(log),
  };
}

function instrumentRecord(record: RecordFile, metrics: ServerMetrics): RecordFile {
  const close = opened(metrics, "record");
  return {
    read: () => record.read(),
    replace: (data, fence) => record.replace(data, fence),
    sync: () => timedSync(record, metrics, "record"),
    close: () => close(record),
  };
}

/** Counts a handle open; the returned close counts it closed once, whatever the close's outcome. */
function opened(metrics: ServerMetrics, kind: FileKind): (file: { close(): Promise<void> }) => Promise<void> {
  metrics.openFiles[kind]++;
  let closed = false;
  return (file) => {
    if (!closed) {
      closed = true;
      metrics.openFiles[kind]--;
    }
    return file.close();
  };
}

async function timedSync(file: { sync(): Promise<void> }, metrics: ServerMetrics, kind: FileKind): Promise<void> {
  const start = performance.now();
  await file.sync();
  metrics.fsync[kind].observe((performance.now() - start) / 1000);
}
