import type { DriverLock, LogFile, RecordFile } from "../../../src/core/driver";
import { VQueueError } from "../../../src/core/errors";
import type { RedisCalls } from "./redis-client";
import { DRIVER_NAME, MAX_STRING_BYTES, toBuffer, toBytes, type QueueKeys } from "./redis-keys";
import { lockNowHeld, type Loss } from "./lease";
import { fenceArgs } from "./redis-lock";
import { FENCED, MISSING, NOT_AT_END, OK } from "./redis-scripts";

/** A file of a queue as the handles see it. */
export interface FileRef {
  calls: RedisCalls;
  keys: QueueKeys;
  path: string;
  key: string;
}

/** A part log (or side log): one Redis string, appended to and cut by fenced scripts, read with GETRANGE. */
export function createLogHandle(file: FileRef): LogFile {
  const { calls, key } = file;
  return {
    async size() {
      return calls.call((client) => client.strlen(key));
    },
    async read(position, length) {
      if (length <= 0) return new Uint8Array(0);
      return toBytes(await calls.call((client) => client.getrangeBuffer(key, position, position + length - 1)));
    },
    async append(at, data, fence) {
      if (at + data.length > MAX_STRING_BYTES) {
        throw new VQueueError(
          "E_IO",
          `The ${DRIVER_NAME} driver cannot grow ${JSON.stringify(file.path)} to ${at + data.length} bytes: a Redis string holds at most 512 MiB. Keep maxPartBytes (plus the largest message) under that.`,
        );
      }
      await fencedWrite(file, fence, "vqAppend", at, toBuffer(data), file.keys.channel);
    },
    async truncate(length, fence) {
      await fencedWrite(file, fence, "vqTruncate", length);
    },
    async sync() {
      // A finished write is as durable as the server's appendfsync makes it (docs/storage.md#queues-on-redis); WAIT runs with each write.
    },
    async close() {},
  };
}

/** An info record: one string, read fresh, replaced whole by a fenced script. */
export function createRecordHandle(file: FileRef): RecordFile {
  const { calls, key } = file;
  return {
    async read() {
      const value = await calls.call((client) => client.getBuffer(key));
      return value ? toBytes(value) : new Uint8Array(0);
    },
    async replace(data, fence) {
      await fencedWrite(file, fence, "vqReplace", toBuffer(data), file.keys.channel, file.path, "0");
    },
    async sync() {},
    async close() {},
  };
}

/**
 * Runs a write script with its fence (keys: the fence's lock, the file, then `extraKeys`...),
 * and turns its status into the driver's errors. A refused fence also marks the lock lost:
 * its holder stops as on a lease seen lost. Returns the script's value.
 */
export async function fencedWrite(
  file: FileRef,
  fence: DriverLock | undefined,
  script: "vqAppend" | "vqTruncate" | "vqReplace" | "vqRemove",
  ...args: (string | number | Buffer)[]
): Promise<number> {
  const { key, token, info } = fenceArgs(fence, file.keys, file.key);
  const keys = script === "vqReplace" ? [key, file.key, file.keys.files] : script === "vqRemove" ? [key, file.keys.files] : [key, file.key];
  const [status, value] = (await file.calls.write(script, ...keys, token, ...args)) as [number, number];
  if (status === OK) return value;
  if (status === FENCED) {
    const found: Loss = value === 0 ? "expired" : { takenBy: value > 0 ? value : undefined };
    info?.lose(found);
    throw new VQueueError(
      "E_FENCED",
      `The ${DRIVER_NAME} driver refused ${script === "vqRemove" ? "to remove" : "a write to"} ${JSON.stringify(file.path)} of a stale holder (epoch ${fence?.epoch}): its lock ${lockNowHeld(found)}. Nothing was ${script === "vqRemove" ? "removed" : "written"}.`,
    );
  }
  if (status === NOT_AT_END) {
    throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver cannot append at byte ${args[0]} of ${JSON.stringify(file.path)}: the log ends at ${value}.`);
  }
  if (status === MISSING) throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver cannot write ${JSON.stringify(file.path)}: it was removed.`);
  throw new VQueueError("E_IO", `The ${DRIVER_NAME} driver got an unexpected reply ${JSON.stringify([status, value])} to ${script}.`);
}
